"""Acceptance 2: a real PyTorch training loop (CPU, small MLP, random data), one window per
epoch, run as ``ERG_SIMULATE=... python3 train.py`` would be."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import child_env

pytest.importorskip("torch")

TRAIN = textwrap.dedent("""
    import json, torch, erg, erg.sim
    torch.manual_seed(0)
    machine = erg.sim.current()            # the machine ERG_SIMULATE made for this process
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(2048, 64), torch.randint(0, 10, (2048,))
    monitor = erg.EnergyMonitor()           # no CUDA here: no framework sync
    epochs = []
    for epoch in range(3):
        machine.set_utilization(0, 0.3 + 0.3 * epoch)   # the simulated GPU's load this epoch
        with monitor.window(f"epoch{epoch}") as w:
            for i in range(0, 2048, 128):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x[i:i + 128]), y[i:i + 128])
                loss.backward()
                opt.step()
        epochs.append({"epoch": epoch, "time": w.time, "gpu_energy": w.gpu_energy_total,
                       "cpu_energy": w.cpu_energy_total, "loss": float(loss)})
        print(f"epoch {epoch}: {w.time:.3f} s, {w.gpu_energy_total:.3f} J GPU", flush=True)
    print(json.dumps(epochs))
""")


def test_torch_training_loop_energy_per_epoch(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = child_env(ERG_SIMULATE="1xA100")
    env.pop("ERG_SIM_STATE", None)  # a machine of its own, as a user's fresh run
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    epochs = json.loads(out.stdout.strip().splitlines()[-1])
    assert [e["epoch"] for e in epochs] == [0, 1, 2]
    for e in epochs:
        assert e["time"] > 0 and e["gpu_energy"] > 0
    print(out.stdout)
