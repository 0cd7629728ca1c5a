"""erg: measure the energy of deep-learning work (GPU, CPU and DRAM).

    import erg
    monitor = erg.EnergyMonitor()
    with monitor.window("epoch") as w:
        train_one_epoch()
    print(w.time, "s", w.total_energy, "J")

``import erg`` is light: it defines the error classes only; the native core (``erg._core``), the
monitors, NumPy, torch, jax and cupy are loaded when a feature first needs them.
``ERG_SIMULATE=2xA100`` runs everything on a simulated machine.
"""

# No `from __future__ import annotations` (importing __future__ costs ~0.2 ms): the few
# annotations below are strings.
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (saves ~10 ms)

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

if TYPE_CHECKING:  # for type checkers; at run time these load on first use (see __getattr__)
    from typing import Any, List

    from . import _core
    from ._core import Cpu, Gpu, Inventory
    from .monitor import EnergyMonitor, Measurement, Window
    from .power import PowerMonitor, monotonic
    from .recording import Recorder, report
    from .temperature import TemperatureMonitor

__version__ = "0.1.0"


def discover(refresh: bool = False) -> "Any":
    """This process's devices: ``.gpus``, ``.cpus``, ``.unavailable`` (why something is missing),
    ``.simulated``. Discovered once per process unless ``refresh``."""
    from . import _env

    return _env.inventory(refresh)


def gpus() -> "List[Any]":
    return list(discover().gpus)


def cpus() -> "List[Any]":
    return list(discover().cpus)


# Loaded on first use so that `import erg` stays cheap: no `typing`, no monitors, and not the
# native core (loading erg._core's shared library and registering its types is most of the cost).
_LAZY = {
    "Gpu": "_core",
    "Cpu": "_core",
    "Inventory": "_core",
    "EnergyMonitor": "monitor",
    "Measurement": "monitor",
    "Window": "monitor",
    "PowerMonitor": "power",
    "monotonic": "power",
    "TemperatureMonitor": "temperature",
    "Recorder": "recording",
    "report": "recording",
}


def __getattr__(name: str) -> "Any":  # lazy names and submodules: erg.sim, erg.distributed, erg.compat, erg.profile, erg.metric, erg.attribution
    import importlib

    if name == "_core":
        return importlib.import_module("._core", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in ("sim", "distributed", "compat", "profile", "metric", "attribution"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'erg' has no attribute {name!r}")


__all__ = [
    "EnergyMonitor", "PowerMonitor", "TemperatureMonitor", "Measurement", "Window", "Recorder", "report", "discover", "gpus", "cpus", "monotonic",
    "Gpu", "Cpu", "Inventory", "ErgError", "NotSupportedError", "NoPermissionError", "NotFoundError",
    "InvalidArgumentError", "DriverError", "GpuLostError", "IoError", "UnavailableError",
    "DeviceTimeoutError", "AlreadyExistsError", "InternalError",
]
