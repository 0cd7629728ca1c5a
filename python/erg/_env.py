"""Process-wide state: this process's devices, opened once by erg::devices (``_core.discover``).

``ERG_SIMULATE=2xA100 python3 train.py`` runs on a simulated machine exactly as the ``erg``
command does, because both open devices through the same C++ function: if ERG_SIM_STATE names a
machine made from the same spec, the process attaches to it (a child of a simulating process);
otherwise it creates one and exports ERG_SIM_STATE/ERG_NVML_LIBRARY/ERG_POWERCAP_ROOT/ERG_SIMULATE
for its children. ERG_DAEMON_SOCK and CUDA_VISIBLE_DEVICES apply the same way too.
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


def _open() -> Any:
    """Opens the devices (C++ erg::devices) and mirrors the simulator's variables, which the
    C++ side may have set, into os.environ so the two stay in step for children."""
    global _machine
    if os.environ.get("ERG_SIMULATE") or os.environ.get("ERG_SIM_STATE"):
        if not os.environ.get("ERG_SIM_NVML_LIBRARY"):
            bundled = _bundled_driver()
            if bundled:
                os.environ["ERG_SIM_NVML_LIBRARY"] = bundled
    from . import _core

    inv = _core.discover()
    _machine = inv.machine
    if _machine is not None:
        os.environ.update(_machine.export_env())
    return inv


def simulated_machine() -> Any:
    """The simulated machine this process's devices come from (None when not simulating)."""
    with _lock:
        global _inventory
        if _inventory is None:
            _inventory = _open()
        return _machine


def inventory(refresh: bool = False) -> Any:
    """The devices of this process, opened once (NVML is loaded once per process)."""
    global _inventory
    with _lock:
        if _inventory is None or refresh:
            _inventory = _open()
        return _inventory


def _reset_for_tests() -> None:
    """Forget the inventory (tests that switch simulated machines)."""
    global _inventory
    with _lock:
        _inventory = None
