"""CPU devices (``zeus.device.cpu``): ``get_cpus()`` and the classes and exceptions of
``zeus.device.cpu.common``, over erg's devices."""

from __future__ import annotations

from typing import Optional

from .common import *  # noqa: F403 (the names Zeus's cpu package re-exports)
from .common import CPUs
from .common import __all__ as _common_all
from .rapl import RAPLCPUs, rapl_is_available

__all__ = ["get_cpus", "RAPLCPUs", "rapl_is_available", *_common_all]

_cpus: Optional[CPUs] = None


def get_cpus() -> CPUs:
    """The CPU packages, one object per process (Zeus's singleton). ZeusCPUInitError when erg
    found none; ZeusCPUNoPermissionError when RAPL may not be read. Rebuilt when erg's device
    inventory was (``erg.sim.create``)."""
    global _cpus
    from erg import _env

    if _cpus is None or getattr(_cpus, "_inventory", None) is not _env.inventory():
        _cpus = RAPLCPUs()
    return _cpus
