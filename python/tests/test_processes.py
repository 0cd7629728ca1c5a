"""Acceptance 5: importing erg and creating monitors spawns no process."""

import json
import subprocess
import sys

from conftest import child_env

CHILDREN = r"""
import glob, json, os, time
def children():
    kids = set()
    for f in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        kids.update(open(f).read().split())
    return sorted(kids)
before = children()
import erg
mon = erg.EnergyMonitor()
mon.begin_window("w"); time.sleep(0.05); mon.end_window("w")
pm = erg.PowerMonitor(period=0.01)
time.sleep(0.05)
from erg.compat.zeus import ZeusMonitor, PowerMonitor
z = ZeusMonitor(sync_execution_with="jax")   # framework only imported at a synced window
z.begin_window("w", sync_execution=False); z.end_window("w", sync_execution=False)
zp = PowerMonitor(update_period=0.05)
from erg.compat.zeus.monitor.temperature import TemperatureMonitor
zt = TemperatureMonitor(update_period=0.05)
tm = erg.TemperatureMonitor(period=0.05)
time.sleep(0.1)
after = children()
pm.stop(); zp.stop(); zt.stop(); tm.stop()
print(json.dumps({"before": before, "after": after, "threads": len(os.listdir("/proc/self/task"))}))
"""


def test_no_process_spawned(machine):
    out = subprocess.run([sys.executable, "-c", CHILDREN], env=child_env(), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["before"] == [] and r["after"] == []
