"""Process-wide state: the simulated machine named by ERG_SIMULATE and the device inventory.

``ERG_SIMULATE=2xA100 python3 train.py`` runs on a simulated machine, exactly as the ``erg``
command does: if ERG_SIM_STATE is also set and ERG_SIMULATE names the same spec, the process
attaches to that machine (a child of a simulating process); otherwise it creates one and exports
ERG_SIM_STATE/ERG_NVML_LIBRARY/ERG_POWERCAP_ROOT/ERG_SIMULATE for its children.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Optional

_lock = threading.Lock()
_machine: Any = None  # erg._core.sim.Machine kept alive for the process
_inventory: Any = None


def _bundled_driver() -> Optional[str]:
    """The simulated libnvidia-ml.so.1 shipped inside an installed package, if any."""
    path = os.path.join(os.path.dirname(__file__), "_sim", "libnvidia-ml.so.1")
    return path if os.path.exists(path) else None


def _setup_simulation() -> None:
    global _machine
    spec = os.environ.get("ERG_SIMULATE", "")
    if not spec or _machine is not None:
        return
    if not os.environ.get("ERG_SIM_NVML_LIBRARY"):
        bundled = _bundled_driver()
        if bundled:
            os.environ["ERG_SIM_NVML_LIBRARY"] = bundled
    from . import _core

    state = os.environ.get("ERG_SIM_STATE", "")
    if state:
        _machine = _core.sim.Machine.attach(state)
        return
    machine = _core.sim.Machine.create(spec)
    os.environ.update(machine.export_env())  # keep os.environ and the C environment in step
    _machine = machine


def simulated_machine() -> Any:
    """The machine set up from ERG_SIMULATE (None when not simulating)."""
    with _lock:
        _setup_simulation()
        return _machine


def inventory(refresh: bool = False) -> Any:
    """The devices of this process, discovered once (NVML is loaded once per process)."""
    global _inventory
    with _lock:
        if _inventory is None or refresh:
            _setup_simulation()
            from . import _core

            _inventory = _core.discover()
        return _inventory


def _reset_for_tests() -> None:
    """Forget the inventory (tests that switch simulated machines)."""
    global _inventory
    with _lock:
        _inventory = None
