"""examples/zeus_power_limit_sweep.py, a Zeus program with only its imports changed, runs on the
suite's simulated machine (GPUs 0 and 1 busy) and prints and logs what Zeus would
(reference/zeus.md §1.1, §1.2, §1.8, §9.2): limits in mW, Measurement.total_energy the sum of the
GPUs' energy, the CSV header and one row per ended window in end order."""

import csv
import os
import re
import subprocess
import sys
import time

import pytest
from conftest import child_env

from erg.compat.zeus.device import get_gpus

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "zeus_power_limit_sweep.py")
WINDOW = re.compile(r"^(limit_\d+W): ([\d.]+) s, ([\d.]+) J \(GPU0 ([\d.]+) J, GPU1 ([\d.]+) J\)$")


def test_only_the_imports_differ_from_zeus():
    source = open(EXAMPLE).read()
    code = source[source.index('"""', 3) + 3:]  # after the docstring
    imports = [line for line in code.splitlines() if line.startswith(("import ", "from "))]
    assert imports == [
        "import sys", "import time",
        "from erg.compat.zeus.device import get_gpus",
        "from erg.compat.zeus.monitor import ZeusMonitor",
        "from erg.compat.zeus.monitor.power import PowerDomain, PowerMonitor",
    ]
    assert not re.search(r"\berg\b", code.replace("erg.compat.zeus", ""))  # nothing else of erg is used


def test_example_runs_and_prints_what_zeus_does(machine, tmp_path):
    for g in (0, 1):
        machine.set_utilization(g, 1.0)
    log = tmp_path / "sweep.csv"
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, EXAMPLE, str(log)], env=child_env(), capture_output=True, text=True,
                             timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        for g in (0, 1):
            machine.set_utilization(g, 0.0)
    assert out.returncode == 0, out.stderr
    assert elapsed < 60
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "GPU 0: NVIDIA A100-SXM4-80GB, power limit 100000 to 400000 mW"  # (min, max) in mW

    windows = [WINDOW.match(line).groups() for line in lines[1:4]]
    assert [w[0] for w in windows] == ["limit_400W", "limit_250W", "limit_100W"]
    for _, secs, total, e0, e1 in windows:
        assert float(secs) == pytest.approx(0.6, abs=0.05)
        assert float(total) == pytest.approx(float(e0) + float(e1), abs=0.002)  # total_energy: GPUs only
    totals = [float(w[2]) for w in windows]
    assert totals[0] > totals[1] > totals[2] > 0  # a lower limit, less energy (simulated)

    sweep = re.match(r"^sweep: ([\d.]+) s, ([\d.]+) J$", lines[4]).groups()
    sampled = [float(x) for x in re.match(r"^power monitor: GPU0 ([\d.]+) J, GPU1 ([\d.]+) J$", lines[5]).groups()]
    assert re.match(r"^power now: GPU0 [\d.]+ W, GPU1 [\d.]+ W$", lines[6])
    assert lines[7] == "limits restored: [400000, 400000] mW"
    assert [get_gpus().get_power_management_limit(g) for g in (0, 1)] == [400_000, 400_000]  # really back

    text = log.read_text()
    assert text.startswith("start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy\n")
    rows = list(csv.reader(text.splitlines()[1:]))
    assert [r[1] for r in rows] == ["limit_400W", "limit_250W", "limit_100W", "sweep"]  # end order
    for row, (_, secs, _, e0, e1) in zip(rows, windows):
        assert f"{float(row[2]):.3f}" == secs and f"{float(row[3]):.3f}" == e0 and f"{float(row[4]):.3f}" == e1
    assert f"{float(rows[3][2]):.3f}" == sweep[0]
    assert float(rows[3][0]) <= float(rows[0][0])  # the sweep began first (time.time() start)
    sweep_gpu = [float(rows[3][3]), float(rows[3][4])]
    assert sum(sweep_gpu) == pytest.approx(float(sweep[1]), abs=0.002)
    gap_s = float(sweep[0]) - sum(float(w[1]) for w in windows)  # setting limits, printing
    assert gap_s >= -0.003
    for g in (0, 1):
        inner = sum(float(r[3 + g]) for r in rows[:3])
        # nested windows: the sweep holds the three (the log rounds each figure to 1 mJ), and what
        # it has beyond them was drawn in the gaps, at no more than the 400 W limit (+5 % for the
        # sensor's gain error and noise) plus 3 % of the inner energy for where each edge falls
        # (2.1 % seen with a load average of 10: a preempted reader places an edge late)
        assert inner - 0.003 <= sweep_gpu[g] <= inner * 1.03 + 400 * 1.05 * gap_s
        assert sampled[g] == pytest.approx(sweep_gpu[g], rel=0.15)  # PowerMonitor over the same span
