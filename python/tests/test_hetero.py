"""erg.hetero: one rank's batch share and power limit from an `erg hetero plan --json` plan, the
limit set through erg's devices on the simulated machine and the previous one restored on leaving
the context or, without one, at interpreter exit."""

import json
import os
import subprocess
from pathlib import Path

import pytest

import erg.hetero
from conftest import PYTHON, child_env

DATA = Path(__file__).resolve().parents[2] / "optimizers" / "hetero" / "tests" / "data"


def plan_dict():
    """A plan shaped as `erg hetero plan --json` writes it (two GPUs, two methods)."""
    gpu = lambda i, t, b, w: {"index": i, "gpu_type": t, "batch_size": b, "power_limit_w": w,  # noqa: E731
                              "step_time_s": 0.1, "avg_power_w": w - 5, "energy_j": 10.0}
    return {"kind": "hetero-plan", "predicted": True, "eta": 0.5, "global_batch": 96,
            "gpus": [{"index": 0, "gpu_type": "A10", "profile": "a.csv"},
                     {"index": 1, "gpu_type": "T4", "profile": "t.csv"}],
            "plans": {"heuristic": {"gpus": [gpu(0, "A10", 70, 150.0), gpu(1, "T4", 26, 225.0)]},
                      "baseline": {"gpus": [gpu(0, "A10", 48, 300.0), gpu(1, "T4", 48, 300.0)]}}}


@pytest.fixture
def limits(machine):
    machine.set_privilege("everyone")
    for g in range(machine.gpu_count):
        erg._env.inventory().gpus[g].reset_power_limit()
    machine.clear_power_limit_log()
    yield machine
    for g in range(machine.gpu_count):
        erg._env.inventory().gpus[g].reset_power_limit()


def test_rank_gets_its_share_and_limit_and_the_old_limit_returns(limits):
    before = limits.power_limit(1)
    with erg.hetero.RankPlan(plan_dict(), rank=1, gpu_index=1) as part:
        assert part.batch_size == 26
        assert part.gpu_type == "T4"
        assert part.global_batch == 96
        assert limits.power_limit(1) == pytest.approx(225.0)
        assert limits.power_limit(0) == pytest.approx(before)  # other GPUs untouched
    assert limits.power_limit(1) == pytest.approx(before)
    sets = [(c["gpu"], c["limit_w"]) for c in limits.power_limit_log() if c["ok"]]
    assert sets == [(1, 225.0), (1, before)]


def test_method_and_plan_from_json_text_or_file(limits, tmp_path):
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan_dict()))
    part = erg.hetero.RankPlan(str(p), rank=0, method="baseline")
    assert (part.batch_size, part.power_limit_w) == (48, 300.0)
    part = erg.hetero.RankPlan(json.dumps(plan_dict()), rank=0)
    assert part.batch_size == 70


def test_errors_name_their_cause():
    with pytest.raises(ValueError, match="no 'brute' method"):
        erg.hetero.RankPlan(plan_dict(), rank=0, method="brute")
    with pytest.raises(ValueError, match="rank 2 is outside the plan's 2 GPUs"):
        erg.hetero.RankPlan(plan_dict(), rank=2)
    with pytest.raises(ValueError, match="not a plan"):
        erg.hetero.load_plan({"kind": "something else"})
    with pytest.raises(ValueError, match="no GPU 9"):
        erg.hetero.RankPlan(plan_dict(), rank=0, gpu_index=9).apply()


def test_limit_restored_at_exit_without_a_context(limits):
    before = limits.power_limit(2)
    code = ("import erg.hetero, json, sys; p = json.loads(sys.argv[1]); "
            "part = erg.hetero.RankPlan(p, rank=0, gpu_index=2).apply(); "
            "import erg.sim; m = erg.sim.current(); assert m.power_limit(2) == 150.0, m.power_limit(2)")
    subprocess.run([PYTHON, "-c", code, json.dumps(plan_dict())], env=child_env(), check=True, timeout=60)
    assert limits.power_limit(2) == pytest.approx(before)
    sets = [(c["gpu"], c["limit_w"]) for c in limits.power_limit_log() if c["ok"]]
    assert sets == [(2, 150.0), (2, before)]


def test_plan_from_the_cli(limits):
    binary = os.environ.get("ERG_BINARY_DIR")
    erg_bin = Path(binary) / "cli" / "erg" if binary else Path(erg.__path__[0]).parent.parent / "cli" / "erg"
    if not erg_bin.exists():
        pytest.skip("the erg binary is not built")
    out = subprocess.run([str(erg_bin), "hetero", "plan", "--profile", str(DATA / "toy_a10.csv"), "--profile",
                          str(DATA / "toy_t4.csv"), "--global-batch", "100", "--json"],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    plan = erg.hetero.load_plan(out)
    parts = [erg.hetero.RankPlan(plan, rank=r, gpu_index=r) for r in (0, 1)]
    assert sum(p.batch_size for p in parts) == 100
    with parts[0] as a10:
        assert limits.power_limit(0) == pytest.approx(a10.power_limit_w)


def test_profile_cli_restores_the_limit_on_sigint(limits, tmp_path):
    binary = os.environ.get("ERG_BINARY_DIR")
    erg_bin = Path(binary) / "cli" / "erg" if binary else Path(erg.__path__[0]).parent.parent / "cli" / "erg"
    if not erg_bin.exists():
        pytest.skip("the erg binary is not built")
    import signal
    import time

    default = limits.power_limit(3)
    out = tmp_path / "a100.csv"
    # A long job per configuration: erg is interrupted while the first one runs at 200 W.
    cmd = [str(erg_bin), "hetero", "profile", "--gpu", "3", "--batch-sizes", "16,32", "--power-limits", "200",
           "--idle-power", "55", "--out", str(out), "--", "sh", "-c",
           f"{erg_bin} simulate load --gpus 3 --batch-size $ERG_HETERO_BATCH_SIZE --samples-per-s 1000 --steps 100000"]
    p = subprocess.Popen(cmd, env=child_env(), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while limits.power_limit(3) != 200.0:
            assert p.poll() is None and time.monotonic() < deadline, "the limit was never set"
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "stopped by a signal" in err and "resume" in err
    assert limits.power_limit(3) == pytest.approx(default)
    assert out.read_text().splitlines() == [
        "gpu_type,batch_size,power_limit_w,step_time_s,avg_power_w,max_power_limit_w,idle_power_w"]
