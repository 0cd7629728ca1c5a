"""The suite runs on one simulated machine (4 A100s, 2 CPU packages), created through
ERG_SIMULATE exactly as a user's ``ERG_SIMULATE=... python3 train.py`` would."""

import os
import sys

SPEC = "4xA100,cpus=2"
# A fresh machine for this run, unless an outer erg (e.g. `erg --simulate`) set one up already.
if os.environ.get("ERG_SIMULATE") != SPEC:
    os.environ["ERG_SIMULATE"] = SPEC
    os.environ.pop("ERG_SIM_STATE", None)
os.environ.pop("CUDA_VISIBLE_DEVICES", None)

import pytest  # noqa: E402

import erg  # noqa: E402
import erg.sim  # noqa: E402

PYTHON = sys.executable


@pytest.fixture(scope="session")
def machine():
    m = erg.sim.current()
    assert m is not None and m.gpu_count == 4
    return m


def child_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.update({k: str(v) for k, v in extra.items()})
    return env
