"""Control of the simulated machine (tests, demos): create or attach, drive load, read the truth.

    m = erg.sim.create("2xA100")      # and point this process (and its children) at it
    m.set_utilization(0, 1.0)
    m.true_energy(0)                  # exact joules since the machine started
"""

from __future__ import annotations

import os
from typing import Any

from . import _core, _env

Machine = _core.sim.Machine
#: The faults Machine.inject_fault gives a GPU (the same vocabulary as `erg simulate fault`).
FAULTS = list(_core.sim.FAULTS)


def create(spec: str, use: bool = True) -> Any:
    """A new simulated machine (``"2xA100"``, ``"8xA100,cpus=2"``...). With ``use``, this
    process's environment points at it (ERG_SIMULATE, ERG_SIM_STATE...) and erg's device
    inventory is rediscovered, so monitors created afterwards measure it."""
    if not os.environ.get("ERG_SIM_NVML_LIBRARY"):
        bundled = _env._bundled_driver()
        if bundled:
            os.environ["ERG_SIM_NVML_LIBRARY"] = bundled
    machine = Machine.create(spec)
    if use:
        os.environ.update(machine.export_env())
        _env._reset_for_tests()
    return machine


def attach(state_file: str) -> Any:
    """Attaches to an existing simulation (its ERG_SIM_STATE file)."""
    return Machine.attach(state_file)


def current() -> Any:
    """The machine this process runs on via ERG_SIMULATE (None when not simulating)."""
    return _env.simulated_machine()
