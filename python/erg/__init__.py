"""erg: measure and optimize the energy of deep-learning work (GPU, CPU and DRAM).

    import erg
    monitor = erg.EnergyMonitor()
    with monitor.window("epoch") as w:
        train_one_epoch()
    print(w.time, "s", w.total_energy, "J")

``import erg`` is light: it loads the native core only; NumPy, torch, jax and cupy are imported
when a feature needs them. ``ERG_SIMULATE=2xA100`` runs everything on a simulated machine.
"""

from __future__ import annotations

from typing import Any, List

from . import _core
from ._errors import (
    AlreadyExistsError,
    DeviceTimeoutError,
    DriverError,
    ErgError,
    GpuLostError,
    InternalError,
    InvalidArgumentError,
    IoError,
    NoPermissionError,
    NotFoundError,
    NotSupportedError,
    UnavailableError,
)
from .monitor import EnergyMonitor, Measurement, Window
from .power import PowerMonitor, monotonic

__version__ = "0.1.0"

Gpu = _core.Gpu
Cpu = _core.Cpu
Inventory = _core.Inventory


def discover(refresh: bool = False) -> Any:
    """This process's devices: ``.gpus``, ``.cpus``, ``.unavailable`` (why something is missing),
    ``.simulated``. Discovered once per process unless ``refresh``."""
    from . import _env

    return _env.inventory(refresh)


def gpus() -> List[Any]:
    return list(discover().gpus)


def cpus() -> List[Any]:
    return list(discover().cpus)


def __getattr__(name: str) -> Any:  # lazy submodules: erg.sim, erg.distributed, erg.compat
    if name in ("sim", "distributed", "compat"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'erg' has no attribute {name!r}")


__all__ = [
    "EnergyMonitor", "PowerMonitor", "Measurement", "Window", "discover", "gpus", "cpus", "monotonic",
    "Gpu", "Cpu", "Inventory", "ErgError", "NotSupportedError", "NoPermissionError", "NotFoundError",
    "InvalidArgumentError", "DriverError", "GpuLostError", "IoError", "UnavailableError",
    "DeviceTimeoutError", "AlreadyExistsError", "InternalError",
]
