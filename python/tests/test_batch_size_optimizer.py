"""erg.optimizers.BatchSizeOptimizer and Zeus's names (erg.compat.zeus.optimizer.batch_size)
against a live ``erg bso serve`` (SQLite in a temporary directory, loopback, a free port). The
server's database is read back with sqlite3: its Trial table mirrors every trial."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import erg
import erg.optimizers as opt
from conftest import PYTHON, child_env


def erg_cli():
    binary = os.environ.get("ERG_BINARY_DIR")
    path = Path(binary) / "cli" / "erg" if binary else Path(os.path.dirname(erg.__path__[0])).parent / "cli" / "erg"
    assert path.exists(), f"the erg command is not at {path} (set ERG_BINARY_DIR to the build directory)"
    return str(path)


class Server:
    def __init__(self, tmp: Path):
        self.db = tmp / "bso.db"
        self.proc = subprocess.Popen(
            [erg_cli(), "bso", "serve", "--db", f"sqlite:///{self.db}", "--listen", "127.0.0.1:0", "--json"],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        assert line, "erg bso serve did not start"
        self.url = json.loads(line)["url"]

    def trials(self, job_id):
        """(trial_number, batch_size, status, time, energy) of the job's trials, in order."""
        with sqlite3.connect(self.db) as db:
            return db.execute(
                'SELECT trial_number, batch_size, status, time, energy FROM "Trial" WHERE job_id = ? '
                "ORDER BY trial_number",
                (job_id,),
            ).fetchall()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("bso"))
    yield s
    s.stop()


def job(prefix, **kw):
    fields = dict(batch_sizes=[64, 16, 32], default_batch_size=32, max_epochs=3, target_metric=0.8, mab_seed=1)
    fields.update(kw)
    return opt.JobSpec(prefix, **fields)


def test_a_run_measured_by_the_monitor_end_to_end(server, machine):
    monitor = erg.EnergyMonitor(gpu_indices=[0, 1])
    bso = opt.BatchSizeOptimizer(monitor, server.url, job("py"))
    assert bso.job["created"] and bso.job_id.startswith("py-")
    assert bso.job["batch_sizes"] == [16, 32, 64]
    gpus = erg.gpus()[:2]
    assert bso.job["number_of_gpus"] == 2 and bso.job["gpu_model"] == gpus[0].name
    # Zeus's max_power: the GPUs' maximum limits (whole watts) added up.
    assert bso.job["max_power"] == sum(g.power_limit_constraints_mw()[1] // 1000 for g in gpus)
    assert bso.get_batch_size() == 32
    assert bso.get_batch_size() == 32  # asked once
    assert len(server.trials(bso.job_id)) == 1
    machine.set_utilization(0, 1.0)
    machine.set_utilization(1, 1.0)
    bso.on_train_begin()
    r = bso.on_evaluate(0.5)
    assert not r.stop_train
    first = (bso.time, bso.energy)
    assert first[0] > 0 and first[1] > 0
    r = bso.on_evaluate(0.9)
    assert r.stop_train and r.converged and r.message == "Train succeeded"
    assert bso.time > first[0] and bso.energy > first[1]
    ((number, bs, status, time, energy),) = server.trials(bso.job_id)
    assert (number, bs, status) == (1, 32, "Succeeded")
    assert time == pytest.approx(bso.time, rel=1e-12) and energy == pytest.approx(bso.energy, rel=1e-12)
    bso.close()  # finished: stays Succeeded
    assert server.trials(bso.job_id)[0][2] == "Succeeded"
    machine.set_utilization(0, 0.0)
    machine.set_utilization(1, 0.0)


def test_given_figures_and_a_run_that_fails(server):
    with opt.BatchSizeOptimizer(None, server.url, job("given", job_id="given-1"), gpus=(300.0, 1, "A40")) as bso:
        assert bso.get_batch_size() == 32
        bso.on_train_begin()
        answers = [bso.on_evaluate(0.1, time=10.0, energy=1000.0) for _ in range(3)]
        assert [a.stop_train for a in answers] == [False, False, True]
        assert not answers[-1].converged and "max_epochs" in answers[-1].message
    ((_, _, status, time, energy),) = server.trials("given-1")
    assert (status, time, energy) == ("Succeeded", 30.0, 3000.0)


def test_a_run_that_exits_early_ends_its_trial(server):
    script = (
        "import erg.optimizers as opt\n"
        f"b = opt.BatchSizeOptimizer(None, {server.url!r}, opt.JobSpec('exit', [8, 16], 16, job_id='exit-1'),"
        " gpus=(250.0, 1, 'V100'))\n"
        "print(b.get_batch_size())\n"
        "b.on_train_begin()\n"
        "print(b.on_evaluate(0.1, time=1.0, energy=1.0).stop_train)\n"
    )
    out = subprocess.run([PYTHON, "-c", script], env=child_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["16", "False"]
    assert server.trials("exit-1")[0][2] == "Failed"  # ended at exit (PATCH /trials)


def test_errors_name_the_status_and_message(server):
    with pytest.raises(erg.InvalidArgumentError, match=r"422.*eta_knob"):
        opt.BatchSizeOptimizer(None, server.url, job("bad", eta_knob=1.5), gpus=(300.0, 1, "A40"))
    opt.BatchSizeOptimizer(None, server.url, job("same", job_id="same-1"), gpus=(300.0, 1, "A40"))
    with pytest.raises(erg.AlreadyExistsError, match="409"):
        opt.BatchSizeOptimizer(None, server.url, job("same", job_id="same-1", eta_knob=0.9), gpus=(300.0, 1, "A40"))
    with pytest.raises(erg.UnavailableError, match="cannot reach"):
        opt.BatchSizeOptimizer(None, "http://127.0.0.1:1", job("x"), gpus=(300.0, 1, "A40"))
    rank1 = opt.BatchSizeOptimizer(None, server.url, job("same", job_id="same-1"), rank=1, gpus=(300.0, 1, "A40"))
    with pytest.raises(erg.InvalidArgumentError, match="rank 0"):
        rank1.get_batch_size()
    assert server.trials("same-1") == []


def test_zeus_names(server, machine):
    from erg.compat.zeus.monitor import ZeusMonitor
    from erg.compat.zeus.optimizer.batch_size.client import BatchSizeOptimizer
    from erg.compat.zeus.optimizer.batch_size.common import JobSpec, ReportResponse, TrainingResult, TrialId
    from erg.compat.zeus.optimizer.batch_size.exceptions import (
        ZeusBSOBadOperationError,
        ZeusBSOOperationOrderError,
        ZeusBSORuntimError,
        ZeusBSOTrainFailError,
    )

    with pytest.raises(ValueError, match="not in batch_sizes"):
        JobSpec(job_id_prefix="z", batch_sizes=[8, 16], default_batch_size=32)
    with pytest.raises(ValueError, match="does not start with prefix"):
        JobSpec(job_id="y-1", job_id_prefix="z", batch_sizes=[8], default_batch_size=8)
    spec = JobSpec(job_id_prefix="zeus", batch_sizes=[32, 8, 16], default_batch_size=16, max_epochs=2, mab_seed=3)
    assert spec.batch_sizes == [8, 16, 32] and spec.eta_knob == 0.5 and spec.beta_knob == 2.0
    t = TrainingResult(job_id="a", batch_size=8, trial_number=1, time=1.0, energy=2.0, metric=0.1, current_epoch=1)
    assert TrainingResult.parse_raw(t.json()) == t
    assert TrialId.parse_obj({"job_id": "a", "batch_size": 8, "trial_number": 1, "extra": 0}).trial_number == 1
    assert ReportResponse(stop_train=True, converged=False, message="m").dict()["converged"] is False

    monitor = ZeusMonitor(gpu_indices=[0], approx_instant_energy=True)
    bso = BatchSizeOptimizer(monitor, server.url, spec)
    assert bso.job.job_id.startswith("zeus-") and bso.job.number_of_gpus == 1
    with pytest.raises(ZeusBSOOperationOrderError):
        bso.on_evaluate(0.1)
    assert bso.get_batch_size() == 16 and bso.trial_number == 1
    bso.on_train_begin()
    bso.on_evaluate(0.1)  # epoch 1 of 2: goes on
    assert not bso.training_finished and bso.cur_epoch == 1
    with pytest.raises(ZeusBSOTrainFailError, match="Train failed"):
        bso.on_evaluate(0.2)  # max_epochs without reaching 0.5
    assert bso.training_finished
    bso.on_evaluate(0.9)  # finished: nothing more
    assert server.trials(bso.job.job_id)[0][2] == "Succeeded"

    with pytest.raises(ZeusBSOBadOperationError):
        BatchSizeOptimizer(monitor, server.url, spec, rank=1).get_batch_size()
    with pytest.raises(ZeusBSORuntimError, match="409"):
        other = JobSpec(job_id=bso.job.job_id, job_id_prefix="zeus", batch_sizes=[8], default_batch_size=8)
        BatchSizeOptimizer(monitor, server.url, other)
    assert isinstance(ZeusBSORuntimError("x"), erg.ErgError)
