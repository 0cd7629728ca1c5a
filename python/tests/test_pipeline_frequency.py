"""erg.optimizers.PipelineFrequencyOptimizer (the rank side of Perseus) on the simulated machine,
against `erg perseus serve` over loopback: a one-rank job whose GPU is set directly (no ergd).
The four-process run with ergd and a killed rank is test_perseus_e2e.py."""

import inspect
import json
import re
import signal
import subprocess
import time

import pytest

import erg
from erg.optimizers import PipelineFrequencyOptimizer
from conftest import PYTHON, child_env
from test_perseus_e2e import HERE, erg_bin, wait_until

PLAN = {"frequencies": [[["forward", 1305], ["forward", 900], ["backward", 1110], ["backward", 705]]]}
WORK = 0.05  # simulator work units per forward (backward: twice)
# A step's measured energy against the simulator's physical energy: erg's edge estimates plus the
# sensor's gain (±2 %) and the A100's partial sampling (each update stands for the last 25 ms of its
# 100 ms period; a step changes clock four times). The C++ test saw −1 % to −11 % on a loaded VM.
STEP_ENERGY_TOLERANCE = 0.20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    plan = tmp_path_factory.mktemp("perseus") / "plan.json"
    plan.write_text(json.dumps(PLAN))
    proc = subprocess.Popen([erg_bin("cli", "erg"), "perseus", "serve", "--plan", str(plan), "--scheduler",
                             "point-solution-3d", "--listen", "127.0.0.1:0", "--rank-timeout", "20", "--json"],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line, "erg perseus serve did not start"
    yield json.loads(line)["url"]
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


def one_rank(url, **kw):
    return PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, url, **kw)


def test_locks_the_planned_clock_per_instruction_and_posts_each_step(machine, server):
    opt = one_rank(server, job_metadata="unit")
    try:
        # Zeus's id plus erg's unguessable part (64 random bits) before the metadata.
        assert re.fullmatch(r"[0-9-]+\+dp1\+pp1\+tp1\+PointSolution3D\+[0-9a-f]{16}\+unit", opt.job_id), opt.job_id
        assert opt.available_frequencies[0] == 1410 and 705 in opt.available_frequencies
        assert opt.schedule == [tuple(x) for x in PLAN["frequencies"][0]]
        assert machine.locked_clocks(0) == {"sm": (1410.0, 1410.0), "memory": (1593.0, 1593.0)}
        truth, took = [], []
        for _ in range(2):
            opt.on_step_begin()
            e0 = machine.true_energy(0)
            for name, mhz in opt.schedule:
                opt.on_instruction_begin(name)
                assert machine.locked_clocks(0)["sm"] == (mhz, mhz)
                assert opt.current_frequency == mhz
                took.append(machine.run_work(0, WORK if name == "forward" else 2 * WORK))
                opt.on_instruction_end(name)
            truth.append(machine.true_energy(0) - e0)  # up to the end edge (before the POST)
            opt.on_step_end()
        assert [(n, f) for n, f, _, _ in opt.instructions] == opt.schedule
        results = opt.results
        assert len(results) == 2
        for k, (res, true_j) in enumerate(zip(results, truth)):
            # 50 and 100 ms windows are shorter than two 100 ms counter updates: the result says so,
            # and that their ends were extrapolated past the counter's last update (they are not
            # settled; the step's own window is).
            assert set(res) == {"rank", "iter_time", "iter_energy", "time_breakdown", "energy_breakdown",
                                "coarse_energy_windows", "extrapolated_energy_windows"}
            assert res["coarse_energy_windows"] == 4
            assert 1 <= res["extrapolated_energy_windows"] <= 4
            assert res["rank"] == 0 and len(res["iter_time"]) == 1 == len(res["iter_energy"])
            assert sorted(res["time_breakdown"]) == ["backward", "forward"]
            fwd_t, bwd_t = res["time_breakdown"]["forward"][0], res["time_breakdown"]["backward"][0]
            assert len(fwd_t) == 2 and len(bwd_t) == 2
            # Each instruction's window holds its work: at least the simulator's duration of it
            # (plan order: forward, forward, backward, backward).
            for measured, work in zip(fwd_t + bwd_t, took[4 * k:4 * k + 4]):
                assert measured >= work - 1e-6
            assert sum(fwd_t) + sum(bwd_t) <= res["iter_time"][0]
            assert res["iter_energy"][0] == pytest.approx(true_j, rel=STEP_ENERGY_TOLERANCE)
    finally:
        opt.close()
    assert machine.locked_clocks(0) == {"sm": (0.0, 0.0), "memory": (0.0, 0.0)}
    assert opt.current_frequency is None


def test_instructions_out_of_plan_are_refused(machine, server):
    opt = one_rank(server, job_metadata="refusals")
    try:
        with pytest.raises(erg.InvalidArgumentError, match="outside a step"):
            opt.on_instruction_begin("forward")
        opt.on_step_begin()
        with pytest.raises(ValueError, match='is "forward", not "backward"'):
            opt.on_instruction_begin("backward")
        opt.on_instruction_begin("forward")
        opt.on_instruction_end("forward")
        with pytest.raises(erg.InvalidArgumentError, match="after 1 of the schedule's 4 instructions"):
            opt.on_step_end()
    finally:
        opt.close()
    assert machine.locked_clocks(0)["sm"] == (0.0, 0.0)


def test_bad_arguments(machine, server):
    with pytest.raises(ValueError, match="device_id 7"):
        PipelineFrequencyOptimizer(0, 0, 0, 0, 7, 1, 1, 1, 1, server)
    with pytest.raises(RuntimeError, match="share_job_id"):  # no torch.distributed here
        PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 2, 1, 2, server)
    with pytest.raises(erg.InvalidArgumentError, match="world_size 3"):
        PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 2, 1, 3, server, share_job_id=lambda mine: mine or "")
    with pytest.raises(erg.InvalidArgumentError, match="https is not supported"):
        one_rank("https://127.0.0.1:1")
    assert machine.locked_clocks(0)["sm"] == (0.0, 0.0)


def test_zeus_import_path_and_signature():
    from erg.compat.zeus.callback import Callback
    from erg.compat.zeus.optimizer.pipeline_frequency import PipelineFrequencyOptimizer as Zeus
    from erg.compat.zeus.optimizer.pipeline_frequency.optimizer import PipelineFrequencyOptimizer as Zeus2

    assert Zeus is Zeus2 and issubclass(Zeus, PipelineFrequencyOptimizer) and issubclass(Zeus, Callback)
    # erg's hooks, not Callback's no-ops.
    assert Zeus.on_instruction_begin is PipelineFrequencyOptimizer.on_instruction_begin
    params = list(inspect.signature(Zeus).parameters.values())
    # Zeus's positional parameters, in its order (reference/zeus.md §6); erg's additions are keyword-only.
    assert [p.name for p in params[:11]] == ["rank", "dp_rank", "pp_rank", "tp_rank", "device_id", "dp_degree",
                                             "pp_degree", "tp_degree", "world_size", "server_url", "job_metadata"]
    assert params[10].default is None
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[11:])
    for hook in ("on_step_begin", "on_step_end", "on_instruction_begin", "on_instruction_end"):
        assert callable(getattr(Zeus, hook))


@pytest.mark.parametrize("guard", [True, False])
def test_a_killed_rank_s_clocks_come_back_through_its_guardian(machine, server, tmp_path, guard):
    """Direct NVML (no ergd): a rank SIGKILLed inside an instruction, clocks locked. Its guardian
    process resets them; with the guardian off (the control) they stay locked."""
    env = child_env()
    for k in ("ERG_DAEMON_SOCK", "ZEUSD_SOCK_PATH", "ERG_DAEMON_HOST_PORT", "ZEUSD_HOST_PORT"):
        env.pop(k, None)
    out = tmp_path / "rank.json"
    args = [PYTHON, str(HERE / "_perseus_rank.py"), "0", "1", server, str(tmp_path / "id"), str(out), "2",
            "--hang-at", "1"] + ([] if guard else ["--no-guard"])
    rank = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until("the rank inside step 1", lambda: rank.poll() is not None or (out.exists() and any(
            step == 1 for step, *_ in json.loads(out.read_text())["locked"])))
        assert rank.poll() is None, rank.stderr.read()
        planned = PLAN["frequencies"][0][0][1]
        assert machine.locked_clocks(0) == {"sm": (planned, planned), "memory": (1593.0, 1593.0)}
        rank.kill()
        rank.wait(timeout=10)
        if guard:
            wait_until("GPU 0's clocks reset by the guardian",
                       lambda: machine.locked_clocks(0) == {"sm": (0.0, 0.0), "memory": (0.0, 0.0)}, 20)
        else:
            time.sleep(1.0)  # ample for a guardian that should not be there
            assert machine.locked_clocks(0)["sm"] == (planned, planned)
    finally:
        if rank.poll() is None:
            rank.kill()
            rank.wait(timeout=10)
        gpu = erg._env.inventory().gpus[0]
        gpu.reset_gpu_locked_clocks()
        gpu.reset_memory_locked_clocks()
