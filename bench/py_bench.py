#!/usr/bin/python3
"""Python-side benchmarks for bench/report (needs the build's python dir on PYTHONPATH).

    py_bench.py window [SPEC]   µs per begin+end from Python on a simulated machine
    py_bench.py import          ms for a fresh `python3 -c 'import erg'` (median of 7)
"""
import os
import statistics
import subprocess
import sys
import time


def window(spec):
    os.environ["ERG_SIMULATE"] = spec
    os.environ.pop("ERG_SIM_STATE", None)
    import erg

    mon = erg.EnergyMonitor(settle=False)  # the edges' own cost, not the wait for an update
    n = 20000
    runs = []
    for _ in range(9):  # median of 9: these VMs are noisy
        t0 = time.perf_counter()
        for _ in range(n):
            mon.begin_window("bench", sync_execution=False)
            mon.end_window("bench", sync_execution=False)
        runs.append((time.perf_counter() - t0) / n * 1e6)
    print(statistics.median(runs))


def import_ms():
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import erg"], check=True)
        runs.append((time.perf_counter() - t0) * 1e3)
    print(statistics.median(runs))


if __name__ == "__main__":
    if sys.argv[1] == "window":
        window(sys.argv[2] if len(sys.argv) > 2 else "8xA100,cpus=0")
    else:
        import_ms()
