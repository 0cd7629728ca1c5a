"""The `erg` command and the Python package open the same devices for the same environment: both
go through erg::devices, so the precedence of ERG_SIMULATE, an inherited ERG_SIM_STATE and
CUDA_VISIBLE_DEVICES cannot drift apart."""

import json
import os
import subprocess
import sys

import pytest

import erg.sim
from conftest import child_env

ERG = os.path.join(os.environ.get("ERG_BINARY_DIR", ""), "cli", "erg")

PY_DEVICES = """
import json, erg
inv = erg.discover()
print(json.dumps({"simulated": inv.simulated,
                  "gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid,
                            "power_limit_w": g.power_limit()} for g in inv.gpus],
                  "cpus": len(inv.cpus)}))
"""

CLEAR = ("ERG_SIMULATE", "ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_POWERCAP_ROOT", "ERG_DAEMON_SOCK",
         "ZEUSD_SOCK_PATH", "CUDA_VISIBLE_DEVICES")


def env_with(**vars):
    env = child_env()
    for k in CLEAR:
        env.pop(k, None)
    env.update(vars)
    return env


def both(env):
    cli = subprocess.run([ERG, "devices", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    c = json.loads(cli.stdout)
    py = subprocess.run([sys.executable, "-c", PY_DEVICES], env=env, capture_output=True, text=True, timeout=60)
    assert py.returncode == 0, py.stderr
    p = json.loads(py.stdout.strip().splitlines()[-1])
    cli_view = {"simulated": c["simulated"], "cpus": len(c["cpus"]),
                "gpus": [{"index": g["index"], "name": g["name"], "uuid": g["uuid"],
                          "power_limit_w": None if g["power_limit_mw"] is None else g["power_limit_mw"] / 1000.0}
                         for g in c["gpus"]]}
    return cli_view, p


@pytest.fixture(scope="module")
def parent():
    """A 3-GPU machine as a simulating parent exports it, with GPU 1 lost: a process attached to
    it sees 2 GPUs, one that made a new machine from the same spec would see 3."""
    m = erg.sim.create("3xA100,cpus=1", use=False)
    m.set_lost(1, True)
    return m


def test_cli_and_python_open_the_same_devices(parent):
    assert os.path.exists(ERG), f"the erg command is not at {ERG} (set ERG_BINARY_DIR to the build directory)"
    state = str(parent.state_file)
    cases = {
        "a fresh spec": env_with(ERG_SIMULATE="2xH100,1xV100,cpus=2"),
        "an inherited machine": env_with(ERG_SIMULATE="3xA100,cpus=1", ERG_SIM_STATE=state),
        "an inherited state alone": env_with(ERG_SIM_STATE=state),
        "another spec under a simulating parent": env_with(ERG_SIMULATE="1xA40", ERG_SIM_STATE=state),
        "CUDA_VISIBLE_DEVICES": env_with(ERG_SIMULATE="3xA100,cpus=1", ERG_SIM_STATE=state,
                                         CUDA_VISIBLE_DEVICES="2,0"),
        "an empty ERG_SIMULATE": env_with(ERG_SIMULATE=""),
    }
    seen = {}
    for name, env in cases.items():
        cli, py = both(env)
        assert cli == py, f"{name}: erg devices {cli} != python {py}"
        seen[name] = cli
    # And what they agree on is the documented precedence, not a shared mistake.
    fresh = [g["name"] for g in seen["a fresh spec"]["gpus"]]
    assert len(fresh) == 3 and "H100" in fresh[0] and "H100" in fresh[1] and "V100" in fresh[2], fresh
    inherited = seen["an inherited machine"]
    assert inherited["simulated"] and len(inherited["gpus"]) == 2, inherited  # GPU 1 is lost there
    assert seen["an inherited state alone"] == inherited
    other = seen["another spec under a simulating parent"]
    assert len(other["gpus"]) == 1 and "A40" in other["gpus"][0]["name"]
    cvd = seen["CUDA_VISIBLE_DEVICES"]["gpus"]
    by_index = {g["index"]: g["uuid"] for g in inherited["gpus"]}
    assert sorted(by_index) == [0, 2]
    assert [g["uuid"] for g in cvd] == [by_index[2], by_index[0]]
    assert not seen["an empty ERG_SIMULATE"]["simulated"]
