"""erg.optimizers.PowerLimitOptimizer (the native state machine under Python), its selectors, the
Hugging Face adapter (through a stand-in TrainerCallback: transformers is not installed here),
the step protocol of `erg optimize power-limit`, and restoring the default limits on SIGTERM —
in-process and through the CLI. Limits are read from the simulator's log of driver calls."""

import importlib
import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

import erg
import erg.optimizers as opt
from conftest import PYTHON, child_env


def erg_cli():
    binary = os.environ.get("ERG_BINARY_DIR")
    path = Path(binary) / "cli" / "erg" if binary else Path(erg.__file__).resolve().parents[0]
    if not binary:  # the build tree: build/<preset>/python/erg -> build/<preset>/cli/erg
        path = Path(os.path.dirname(erg.__path__[0])).parent / "cli" / "erg"
    if not path.exists():
        pytest.skip("the erg binary is not built")
    return str(path)


class Replay:
    """A monitor replaying a profile: time and per-GPU energy per limit (W) from the window name."""

    def __init__(self, gpu_indices=(0, 1)):
        self.gpu_indices = list(gpu_indices)
        self.open = set()
        self.cancelled = []

    @staticmethod
    def figures(w):
        x = (400 - w) / 300
        t = 20 * (1 + 3 * x ** 3)
        return (70 + 0.85 * w) * t, t

    def begin_window(self, name, sync_execution=True):
        assert name not in self.open
        self.open.add(name)

    def end_window(self, name, sync_execution=True, cancel=False):
        self.open.remove(name)
        if cancel:
            self.cancelled.append(name)
            return None
        e, t = self.figures(int(name.rsplit("_", 1)[1]))
        return types.SimpleNamespace(time=t, gpu_energy={i: e for i in self.gpu_indices})


@pytest.fixture
def sim(machine):
    machine.set_privilege("everyone")
    machine.clear_power_limit_log()
    yield machine
    for g in range(machine.gpu_count):
        assert machine.power_limit(g) == 400.0, f"GPU {g} left at {machine.power_limit(g)} W"


def driver_limits(machine, gpu=0):
    return [c["limit_w"] for c in machine.power_limit_log() if c["ok"] and c["gpu"] == gpu]


@pytest.mark.parametrize("eta", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_sequence_and_zeus_cost_pick(sim, eta):
    mon = Replay()
    with opt.PowerLimitOptimizer(mon, opt.ZeusCost(eta, 2), warmup_steps=2, profile_steps=3) as plo:
        assert plo.power_limits == list(range(400_000, 99_999, -25_000))
        steps = 0
        while plo.optimal_power_limit is None:
            if isinstance(plo.state, opt.Profiling) and plo.state.current_power_limit == 300_000 and not mon.cancelled:
                plo.on_epoch_end()  # interrupted: the maximum, then 300 W again
                assert isinstance(plo.state, opt.Ready) and plo.state.next_power_limit == 300_000
            plo.on_step_begin()
            steps += 1
        costs = {m.power_limit: eta * m.energy + (1 - eta) * 400 * 2 * m.time for m in plo.measurements}
        best = min(costs, key=costs.get)
        assert plo.optimal_power_limit == best * 1000
        want = [w for w in range(400, 99, -25)]
        want[4:5] = [300, 400, 300]
        want = want[1:] + ([best] if best != 100 else [])  # the GPUs start at 400 W: no call for it
        assert driver_limits(sim, 0) == want and driver_limits(sim, 1) == want
        assert driver_limits(sim, 2) == [] and mon.cancelled == ["__GlobalPowerLimitOptimizer_300"]
    assert driver_limits(sim, 0)[-1] == 400  # restored at the end of the with block


def test_user_selector_and_errors(sim, tmp_path):
    class Lowest(opt.OptimumSelector):
        def select(self, measurements):
            return min(m.power_limit for m in measurements)

    plo = opt.PowerLimitOptimizer(Replay(), Lowest(), warmup_steps=1, profile_steps=1, pl_step=100)
    while plo.optimal_power_limit is None:
        plo.on_step_begin()
    assert plo.optimal_power_limit == 100_000 and sim.power_limit(0) == 100.0
    plo.restore()

    class Broken(opt.OptimumSelector):
        def select(self, measurements):
            raise KeyError("mine")

    plo = opt.PowerLimitOptimizer(Replay(), Broken(), warmup_steps=1, profile_steps=1, pl_step=300)
    with pytest.raises(KeyError, match="mine"):  # the selector's own exception comes through
        for _ in range(10):
            plo.on_step_begin()
    plo.restore()
    with pytest.raises(ValueError, match="eta_knob must be between 0 and 1"):
        opt.ZeusCost(1.5)
    with pytest.raises(ValueError, match="max_slowdown_factor must be greater than or equal to 1.0. Got 0.5."):
        opt.MaxSlowdownConstraint(0.5)
    assert opt.Energy().select([opt.PowerLimitMeasurement(300, 10.0, 1.0), opt.PowerLimitMeasurement(200, 9.0, 2.0)]) == 200


def test_saved_profile_is_reloaded_and_skips_profiling(sim, tmp_path):
    path = tmp_path / "profile.json"
    plo = opt.PowerLimitOptimizer(Replay(), opt.Energy(), warmup_steps=1, profile_steps=1, profile_path=path)
    while plo.optimal_power_limit is None:
        plo.on_step_begin()
    plo.restore()
    doc = json.loads(path.read_text())
    assert [m["power_limit"] for m in doc["measurements"]] == list(range(400, 99, -25))
    assert set(doc["measurements"][0]) == {"power_limit", "energy", "time"}
    sim.clear_power_limit_log()
    mon = Replay()
    again = opt.PowerLimitOptimizer(mon, opt.Time(), profile_path=str(path))
    assert isinstance(again.state, opt.Done) and again.optimal_power_limit == 400_000
    for _ in range(100):
        again.on_step_begin()
    assert mon.open == set() and driver_limits(sim) == []
    again.restore()


def test_hugging_face_adapter_through_a_stand_in(sim, monkeypatch):
    class TrainerCallback:  # transformers.TrainerCallback's hook signatures
        def on_step_begin(self, args, state, control, **kwargs):
            pass

        def on_epoch_end(self, args, state, control, **kwargs):
            pass

    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(TrainerCallback=TrainerCallback))
    hf_mod = importlib.reload(importlib.import_module("erg.optimizers._huggingface"))
    cb = hf_mod.HFPowerLimitOptimizer(Replay(), warmup_steps=1, profile_steps=1, pl_step=300)
    assert isinstance(cb, TrainerCallback)
    cb.on_step_begin(None, None, None, model=None)
    cb.on_step_begin(None, None, None)
    assert isinstance(cb.optimizer.state, opt.Warmup)
    cb.on_epoch_end(None, None, None, model=None)
    assert isinstance(cb.optimizer.state, opt.Ready)
    cb.optimizer.restore()

    monkeypatch.setitem(sys.modules, "transformers", None)  # not installed
    hf_mod = importlib.reload(hf_mod)
    with pytest.raises(ImportError, match="transformers"):
        hf_mod.HFPowerLimitOptimizer(Replay())
    monkeypatch.delitem(sys.modules, "transformers")
    importlib.reload(hf_mod)


def test_report_step_writes_the_protocol_lines(monkeypatch):
    from erg.optimizers import _report

    r, w = os.pipe()
    try:
        monkeypatch.setenv("ERG_OPTIMIZER_FD", str(w))
        monkeypatch.setattr(_report, "_checked", False)
        assert opt.report_step() and opt.report_step() and opt.report_epoch()
        assert os.read(r, 100) == b"step\nstep\nepoch\n"
        monkeypatch.delenv("ERG_OPTIMIZER_FD")
        monkeypatch.setattr(_report, "_checked", False)
        assert opt.report_step() is False
    finally:
        os.close(r)
        os.close(w)


SIGTERM_CHILD = r"""
import sys, time, types
import erg, erg.optimizers as opt
class Null:
    gpu_indices = [0, 1, 2, 3]
    def begin_window(self, name): pass
    def end_window(self, name, cancel=False):
        return types.SimpleNamespace(time=1.0, gpu_energy={0: 1.0})
plo = opt.PowerLimitOptimizer(Null(), warmup_steps=1, profile_steps=5, pl_step=100)
while not (isinstance(plo.state, opt.Profiling) and plo.state.current_power_limit < 400_000):
    plo.on_step_begin()
print("ready", flush=True)
time.sleep(60)
"""


def test_sigterm_while_profiling_restores_in_process(sim):
    p = subprocess.Popen([PYTHON, "-c", SIGTERM_CHILD], env=child_env(), stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    assert all(sim.power_limit(g) == 300.0 for g in range(4))
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == -signal.SIGTERM  # still dies of the signal
    assert all(sim.power_limit(g) == 400.0 for g in range(4))


CLI_CHILD = r"""
import time, erg.optimizers as opt
while True:
    opt.report_step()
    time.sleep(0.01)
"""


def test_cli_sigterm_while_profiling_restores(sim):
    p = subprocess.Popen([erg_cli(), "optimize", "power-limit", "--warmup-steps", "2", "--profile-steps", "1000",
                          "--pl-step", "100", "--", PYTHON, "-c", CLI_CHILD], env=child_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while 300.0 not in driver_limits(sim) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(sim.power_limit(g) == 300.0 for g in range(4)), "profiling 300 W"
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "back at its default power limit" in err
    assert all(sim.power_limit(g) == 400.0 for g in range(4))


WORK_CHILD = r"""
import erg.sim, erg.optimizers as opt
m = erg.sim.current()
for _ in range(2 + 4 * 5 + 3):
    opt.report_step()
    m.run_work(0, 0.03)
"""


def test_cli_live_run_picks_and_reports_json(sim):
    out = subprocess.run([erg_cli(), "optimize", "power-limit", "--gpus", "0", "--selector", "energy", "--json",
                          "--warmup-steps", "2", "--profile-steps", "3", "--pl-step", "100", "--",
                          PYTHON, "-c", WORK_CHILD], env=child_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    j = json.loads(out.stdout)
    assert j["simulated"] is True and j["state"] == "Done" and j["selector"] == "energy"
    assert j["power_limits_w"] == [400, 300, 200, 100]
    assert [m["power_limit_w"] for m in j["measurements"]] == [400, 300, 200, 100]
    best = min(j["measurements"], key=lambda m: m["energy_j"])
    assert j["optimal_power_limit_w"] == best["power_limit_w"]
    assert j["saving"] is None or j["saving"]["vs_power_limit_w"] == 400
    assert "(simulated)" in out.stderr
