"""GPU devices (``zeus.device.gpu``): ``get_gpus()`` and the classes and exceptions of
``zeus.device.gpu.common``, over erg's devices."""

from __future__ import annotations

from typing import Optional

from .common import *  # noqa: F403 (the names Zeus's gpu package re-exports)
from .common import GPUs, ZeusGPUInitError
from .common import __all__ as _common_all
from .nvidia import NVIDIAGPUs, nvml_is_available

__all__ = ["get_gpus", "NVIDIAGPUs", "nvml_is_available", *_common_all]

_gpus: Optional[GPUs] = None


def get_gpus(ensure_homogeneous: bool = False) -> GPUs:
    """The GPUs of this process, one object per process (Zeus's singleton).

    ZeusGPUInitError when erg found no GPU; with ``ensure_homogeneous``,
    ZeusGPUHeterogeneousError when they are not all the same model (checked on every such call,
    not only the first as in Zeus). Rebuilt when erg's device inventory was (``erg.sim.create``).
    """
    global _gpus
    from erg import _env

    inventory = _env.inventory()
    if _gpus is None or getattr(_gpus, "_inventory", None) is not inventory:
        _gpus = NVIDIAGPUs(False)
    if ensure_homogeneous:
        _gpus._ensure_homogeneous()
    return _gpus
