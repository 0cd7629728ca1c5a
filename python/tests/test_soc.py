"""Jetson SoC rails in Python: EnergyMonitor windows carry each rail's energy (Measurement.soc_energy),
within 3 % of the simulated rails' true energy (simulated figures). Runs in a child process on its
own simulated Jetson Orin, as the session's machine is an A100 server."""

import json
import subprocess
import sys

from conftest import child_env

CHILD = r"""
import json, time
import erg, erg.sim
m = erg.sim.current()
labels = m.rail_labels()
for i, label in enumerate(labels):
    if label != "VDD_IN":
        m.set_rail_power(label, 2.0 + i)
time.sleep(0.3)
mon = erg.EnergyMonitor()
before = {l: m.true_rail_energy(l) for l in labels}
mon.begin_window("w", sync_execution=False)
time.sleep(1.5)
meas = mon.end_window("w", sync_execution=False)
after = {l: m.true_rail_energy(l) for l in labels}
print(json.dumps({"soc": meas.soc_energy, "true": {l: after[l] - before[l] for l in labels},
                  "total": meas.total_energy, "gpus": len(meas.gpu_energy)}))
"""


def test_jetson_rails_in_a_window():
    env = child_env(ERG_SIMULATE="jetson=orin")
    env.pop("ERG_SIM_STATE", None)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["gpus"] == 0
    assert len(r["soc"]) == 1
    soc = r["soc"][0]
    assert soc["error"] is None
    assert set(soc["rails"]) == set(r["true"])
    assert "gpu" in soc["kinds"].values() or "cpu_gpu" in soc["kinds"].values()
    for label, truth in r["true"].items():
        assert truth > 0
        assert abs(soc["rails"][label] - truth) <= 0.03 * truth, (label, soc["rails"][label], truth)
    assert soc["total"] > 0
    assert r["total"] >= soc["total"]  # the window total counts the module
