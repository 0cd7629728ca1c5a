"""Device abstraction (``zeus.device``): ``get_gpus()``, ``get_cpus()``, ``get_soc()`` and the GPU
exceptions, over erg's devices (NVML, RAPL, the simulated machine, ergd when unprivileged).

    from erg.compat.zeus.device import get_gpus     # was: from zeus.device import get_gpus
    gpus = get_gpus()
    gpus.set_power_management_limit(0, 250_000)     # mW
"""

from __future__ import annotations

from .cpu import get_cpus
from .gpu import (
    ZeusGPUAlreadyInitializedError,
    ZeusGPUCorruptedInfoROMError,
    ZeusGPUDriverNotLoadedError,
    ZeusGPUFunctionNotFoundError,
    ZeusGPUHeterogeneousError,
    ZeusGPUInitError,
    ZeusGPUInsufficientPowerError,
    ZeusGPUInsufficientSizeError,
    ZeusGPUInvalidArgError,
    ZeusGPUIRQError,
    ZeusGPULibraryNotFoundError,
    ZeusGPULibRMVersionMismatchError,
    ZeusGPULostError,
    ZeusGPUMemoryError,
    ZeusGPUNoPermissionError,
    ZeusGPUNotFoundError,
    ZeusGPUNotSupportedError,
    ZeusGPUOperatingSystemError,
    ZeusGPUResetRequiredError,
    ZeusGPUTimeoutError,
    ZeusGPUUnknownError,
    get_gpus,
)
from .soc import get_soc

__all__ = [
    "get_gpus", "get_cpus", "get_soc",
    "ZeusGPUInitError", "ZeusGPUInvalidArgError", "ZeusGPUNotSupportedError", "ZeusGPUNoPermissionError",
    "ZeusGPUAlreadyInitializedError", "ZeusGPUNotFoundError", "ZeusGPUInsufficientSizeError",
    "ZeusGPUInsufficientPowerError", "ZeusGPUDriverNotLoadedError", "ZeusGPUTimeoutError", "ZeusGPUIRQError",
    "ZeusGPULibraryNotFoundError", "ZeusGPUFunctionNotFoundError", "ZeusGPUCorruptedInfoROMError",
    "ZeusGPULostError", "ZeusGPUResetRequiredError", "ZeusGPUOperatingSystemError",
    "ZeusGPULibRMVersionMismatchError", "ZeusGPUMemoryError", "ZeusGPUUnknownError", "ZeusGPUHeterogeneousError",
]
