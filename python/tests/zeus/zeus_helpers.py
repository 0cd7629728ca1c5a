"""Helpers of the Zeus-compatibility tests (reference/zeus.md §1, §9): signatures, and child
processes on a simulated machine of another make-up than the session's 4xA100."""

import inspect
import json
import os
import subprocess
import sys

EMPTY = inspect.Parameter.empty


def params(fn):
    """[(name, default)] of ``fn``'s parameters, ``self`` left out (EMPTY: required)."""
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def run_child(code, spec, timeout=60):
    """Runs ``code`` in a fresh interpreter on its own simulated machine ``spec``; returns the
    JSON object its last stdout line holds."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["ERG_SIMULATE"] = spec
    for k in ("ERG_SIM_STATE", "ERG_NVML_LIBRARY", "ERG_POWERCAP_ROOT", "CUDA_VISIBLE_DEVICES"):
        env.pop(k, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


# A child's logging setup: every record of Zeus's loggers collected, printed as JSON at the end.
CAPTURE_LOGS = r"""
import json, logging
RECORDS = []
class _Keep(logging.Handler):
    def emit(self, r):
        RECORDS.append([r.name, r.levelname, r.getMessage()])
_root = logging.getLogger("zeus")
_root.addHandler(_Keep())
_root.setLevel(logging.DEBUG)
"""
