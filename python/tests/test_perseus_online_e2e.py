"""The Python rank client against the online scheduler, end to end (issue 20).

`erg perseus serve --scheduler online` profiles a 4-stage × 2-micro-batch job from its ranks'
own results: ergd runs on the simulated machine and four separate Python processes
(_perseus_rank.py), one per stage, drive their GPUs through erg.optimizers.PipelineFrequencyOptimizer
and post each step's per-instruction times and energies. The stages are imbalanced (different
simulated work), and the simulated work runs at the locked clock under the faithful model, so
time and energy depend on the clock. Checked: every result is accepted, the scheduler plans
within its stated bound (GET /state), from then on every GPU's locked SM clock follows the served
plan, the plan slows some computation down, and the profile it dumps (profile.csv) plans to the
same plan with `erg perseus plan`. A second test posts instruction windows too short for the
GPU's energy counter: the scheduler refuses them (422) instead of planning from them.
"""

import json
import subprocess
import urllib.request

import pytest

from conftest import PYTHON, child_env
from test_perseus_e2e import BOUND_S, HERE, erg_bin, ergd  # noqa: F401  (ergd is a fixture)

STAGES, MICRO = 4, 2
FORWARD_WORK = 0.25  # simulator work units (s of a busy GPU at 1410 MHz); backward twice
LOADS = (1.0, 1.4, 1.0, 1.2)  # per stage: stage 1 is the critical one
CLOCKS = (1410, 1110, 810)  # swept clocks (A100); N = 3, so the plan is served from round 3 at the latest
P2P_W = 55.0
STEPS = len(CLOCKS) + 2  # every profiling round, then at least two rounds of the plan


def serve(tmp_path, *extra):
    server = subprocess.Popen([erg_bin("cli", "erg"), "perseus", "serve", "--scheduler", "online", "--microbatches",
                               str(MICRO), "--frequencies", ",".join(map(str, CLOCKS)), "--p2p-power-w", str(P2P_W),
                               "--listen", "127.0.0.1:0", "--rank-timeout", "30", "--dump-dir",
                               str(tmp_path / "dump"), "--json", *extra], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if not line:
        server.kill()
        pytest.fail(f"erg perseus serve did not start: {server.stderr.read()}")
    return server, json.loads(line)["url"]


def run_ranks(tmp_path, url, env, works, steps):
    ranks = [subprocess.Popen([PYTHON, str(HERE / "_perseus_rank.py"), str(r), str(len(works)), url,
                               str(tmp_path / "job_id"), str(tmp_path / f"rank{r}.json"), str(steps), "--work",
                               str(w)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r, w in enumerate(works)]
    codes = []
    try:
        for r, p in enumerate(ranks):
            try:
                _, err = p.communicate(timeout=BOUND_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"rank {r} still running after {BOUND_S} s")
            codes.append((p.returncode, err))
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    return codes, [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(len(works))]


def get_state(url, job_id):
    with urllib.request.urlopen(f"{url}/state/{job_id}", timeout=10) as res:
        return json.loads(res.read())


def stop(server):
    server.terminate()
    server.wait(timeout=10)


def test_python_ranks_profile_online_and_follow_the_served_plan(machine, ergd, tmp_path):
    sock, _ = ergd
    server, url = serve(tmp_path)
    try:
        env = child_env(ERG_DAEMON_SOCK=str(sock))
        env.pop("CUDA_VISIBLE_DEVICES", None)
        codes, seen = run_ranks(tmp_path, url, env, [FORWARD_WORK * load for load in LOADS], STEPS)
        for r, (code, err) in enumerate(codes):
            assert code == 0, f"rank {r} exited {code}: {seen[r]['post_error']} {err}"
        job_id = seen[0]["job_id"]
        state = get_state(url, job_id)
    finally:
        stop(server)

    assert all(c in seen[0]["available"] for c in CLOCKS)
    # Every rank's result of every round was accepted (a 422 would have ended the rank with exit 4).
    for r, s in enumerate(seen):
        assert s["post_error"] is None and len(s["results"]) == STEPS, f"rank {r}"
        assert "coarse_energy_windows" not in s["results"][0], f"rank {r}: windows too short for the counter"
    assert state["round"] == STEPS - 1
    sched = state["scheduler"]
    # Converged within the stated bound: N profiling rounds at most, served from round N at the latest.
    assert sched["phase"] == "planned" and sched["frequencies_mhz"] == list(CLOCKS)
    assert sched["rounds_bound"] == len(CLOCKS) + 1
    plan = sched["plan"]
    assert plan["planned_at_round"] <= sched["rounds_bound"] - 1 and plan["planned_at_round"] < STEPS - 1
    served = plan["frequencies"]
    assert [len(stage) for stage in served] == [2 * MICRO] * STAGES

    # The profile came from the ranks and follows the clock: per (stage, instruction) the time rises
    # as the clock falls; the heavier stages take longer at the highest clock.
    rows = {(p["stage"], p["instruction"], p["frequency"]): (p["time"], p["energy"]) for p in sched["profile"]}
    for s in range(STAGES):
        for name in ("forward", "backward"):
            times = [rows[(s, name, c)][0] for c in CLOCKS if (s, name, c) in rows]
            assert len(times) >= 2 and times == sorted(times), (s, name, times)
    for s in range(STAGES):
        ratio = rows[(s, "forward", 1410)][0] / rows[(0, "forward", 1410)][0]
        assert ratio == pytest.approx(LOADS[s] / LOADS[0], rel=0.05), (s, ratio)

    # During profiling round 0 every instruction ran at the highest clock; from the round the
    # plan was served on, every instruction ran with its GPU's SM clock locked at the plan's MHz.
    first = plan["planned_at_round"]
    for r, s in enumerate(seen):
        by_step = {}
        for step, name, mhz, sm, mem in s["locked"]:
            by_step.setdefault(step, []).append((name, mhz, tuple(sm), tuple(mem)))
        assert sorted(by_step) == list(range(STEPS))
        assert all(sm == (1410, 1410) for _, _, sm, _ in by_step[0])
        for step in range(first, STEPS):
            got = [(name, sm) for name, _, sm, _ in by_step[step]]
            want = [(name, (mhz, mhz)) for name, mhz in served[r]]
            assert got == want, f"rank {r} step {step}: locked {got}, plan {want}"
            assert all(mem == (1593, 1593) for *_, mem in by_step[step])
    # The stages are imbalanced, so the plan is not all-maximum: some computation runs slower.
    assert any(mhz < CLOCKS[0] for stage in served for _, mhz in stage), served
    for g in range(STAGES):
        assert machine.locked_clocks(g) == {"sm": (0.0, 0.0), "memory": (0.0, 0.0)}, f"GPU {g}"

    # The dump holds the profile as the planner's CSV; planning from it gives the served plan.
    job_dir = tmp_path / "dump" / job_id
    assert json.loads((job_dir / "scheduler.json").read_text())["plan"] == plan
    csv = job_dir / "profile.csv"
    assert csv.read_text().splitlines()[0].split(",")[:5] == ["stage", "instruction", "frequency", "time", "energy"]
    assert len(csv.read_text().splitlines()) == 1 + len(sched["profile"])
    out = subprocess.run([erg_bin("cli", "erg"), "perseus", "plan", "--profile", str(csv), "--stages", str(STAGES),
                          "--microbatches", str(MICRO), "--p2p-power-w", str(P2P_W), "--out", str(tmp_path / "plans"),
                          "--json"], capture_output=True, text=True, timeout=BOUND_S)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert len(summary["frontier"]) == plan["plans"]
    fastest = json.loads((tmp_path / "plans" / f"plan_{plan['index']:05d}.json").read_text())
    assert fastest["frequencies"] == served
    assert fastest["time_s"] == pytest.approx(plan["time_s"], rel=1e-12)
    assert fastest["energy_j"] == pytest.approx(plan["energy_j"], rel=1e-12)
    print(f"online plan after {first} profiling rounds (bound {sched['rounds_bound']}): {served} "
          f"(simulated 4xA100, modelled {plan['time_s']:.4f} s, {plan['energy_j']:.1f} J per iteration)")


def test_instruction_windows_too_short_for_the_counter_are_refused(machine, tmp_path):
    # One rank (pp 1), no ergd: a 10 ms forward is far shorter than two 100 ms counter updates.
    server, url = serve(tmp_path)
    try:
        env = child_env()
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env.pop("ERG_DAEMON_SOCK", None)
        codes, seen = run_ranks(tmp_path, url, env, [0.01], 1)
        state = get_state(url, seen[0]["job_id"])
    finally:
        stop(server)
    code, err = codes[0]
    assert code == 4, f"rank exited {code}: {err}"
    assert "coarse_energy_windows" in seen[0]["post_error"] and "too coarse" in seen[0]["post_error"]
    assert f"{2 * MICRO} of the posted instruction energies" in seen[0]["post_error"]
    # The result was not taken: nothing was profiled from it.
    assert state["scheduler"]["phase"] == "profiling" and state["scheduler"]["rounds_observed"] == 0
    assert state["scheduler"]["profile"] == []
    assert machine.locked_clocks(0) == {"sm": (0.0, 0.0), "memory": (0.0, 0.0)}
