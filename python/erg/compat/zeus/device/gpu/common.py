"""The GPU abstraction Zeus programs call (``zeus.device.gpu.common``): ``GPU`` (one device),
``GPUs`` (the collection, forwarding with a leading ``gpu_index``), ``EmptyGPUs`` and the
exception classes. Units as Zeus: mW, mJ, MHz, °C, as ints."""

from __future__ import annotations

import abc
import functools
import logging
import warnings
from typing import Any, Dict, Sequence, Tuple, Type

from erg import _errors
from ..common import DeprecatedAliasABCMeta, deprecated_alias, has_sys_admin
from ..exception import ZeusBaseGPUError

__all__ = [
    "GPU", "GPUs", "EmptyGPUs",
    "ZeusGPUInitError", "ZeusGPUInvalidArgError", "ZeusGPUNotSupportedError", "ZeusGPUNoPermissionError",
    "ZeusGPUAlreadyInitializedError", "ZeusGPUNotFoundError", "ZeusGPUInsufficientSizeError",
    "ZeusGPUInsufficientPowerError", "ZeusGPUDriverNotLoadedError", "ZeusGPUTimeoutError", "ZeusGPUIRQError",
    "ZeusGPULibraryNotFoundError", "ZeusGPUFunctionNotFoundError", "ZeusGPUCorruptedInfoROMError",
    "ZeusGPULostError", "ZeusGPUResetRequiredError", "ZeusGPUOperatingSystemError",
    "ZeusGPULibRMVersionMismatchError", "ZeusGPUMemoryError", "ZeusGPUUnknownError", "ZeusGPUHeterogeneousError",
]

logger = logging.getLogger("zeus.device.gpu.common")

_SYS_ADMIN_WARNING = (
    "You are about to call a GPU management API that requires `SYS_ADMIN` privileges. Some energy "
    "optimizers that change the GPU's power settings need this.\nSee "
    "https://ml.energy/zeus/getting_started/#system-privileges for more information and how to "
    "obtain `SYS_ADMIN`."
)


class GPU(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """One GPU. Each method calls the device once; errors are Zeus's GPU exceptions."""

    def __init__(self, gpu_index: int) -> None:
        self.gpu_index = gpu_index

    def _warn_sys_admin(self) -> None:
        """Warns once (``warnings``, as Zeus) before a privileged call without SYS_ADMIN."""
        if not getattr(self, "_disable_sys_admin_warning", False) and not has_sys_admin():
            warnings.warn(_SYS_ADMIN_WARNING, stacklevel=3)
            self._disable_sys_admin_warning = True

    @property
    @abc.abstractmethod
    def supports_nonblocking_setters(self) -> bool:
        """Whether setters honour ``block=False``."""

    @deprecated_alias("getName")
    @abc.abstractmethod
    def get_name(self) -> str:
        """The GPU model's name."""

    @deprecated_alias("getPowerManagementLimitConstraints")
    @abc.abstractmethod
    def get_power_management_limit_constraints(self) -> Tuple[int, int]:
        """(min, max) power limit, mW."""

    @abc.abstractmethod
    def get_power_management_limit(self) -> int:
        """The power limit now, mW."""

    @deprecated_alias("setPowerManagementLimit")
    @abc.abstractmethod
    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Sets the power limit, mW."""

    @deprecated_alias("resetPowerManagementLimit")
    @abc.abstractmethod
    def reset_power_management_limit(self, block: bool = True) -> None:
        """Sets the power limit back to its default."""

    @deprecated_alias("setPersistenceMode")
    @abc.abstractmethod
    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        """Sets persistence mode."""

    @abc.abstractmethod
    def get_persistence_mode(self) -> bool:
        """Whether persistence mode is on."""

    @deprecated_alias("getSupportedMemoryClocks")
    @abc.abstractmethod
    def get_supported_memory_clocks(self) -> list[int]:
        """Supported memory clocks, MHz."""

    @deprecated_alias("setMemoryLockedClocks")
    @abc.abstractmethod
    def set_memory_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        """Locks the memory clock to a range, MHz."""

    @deprecated_alias("resetMemoryLockedClocks")
    @abc.abstractmethod
    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        """Unlocks the memory clock."""

    @deprecated_alias("getSupportedGraphicsClocks")
    @abc.abstractmethod
    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        """Supported graphics clocks at a memory clock, MHz."""

    @deprecated_alias("setGpuLockedClocks")
    @abc.abstractmethod
    def set_gpu_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        """Locks the graphics clock to a range, MHz."""

    @deprecated_alias("resetGpuLockedClocks")
    @abc.abstractmethod
    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        """Unlocks the graphics clock."""

    def reset_locked_clocks(self, block: bool = True) -> None:
        """Unlocks both the graphics and the memory clock."""
        self.reset_gpu_locked_clocks(block)
        self.reset_memory_locked_clocks(block)

    @deprecated_alias("getAveragePowerUsage")
    @abc.abstractmethod
    def get_average_power_usage(self) -> int:
        """Board power averaged by the driver (about 1 s), mW."""

    @deprecated_alias("getInstantPowerUsage")
    @abc.abstractmethod
    def get_instant_power_usage(self) -> int:
        """Board power now, mW."""

    @deprecated_alias("getAverageMemoryPowerUsage")
    @abc.abstractmethod
    def get_average_memory_power_usage(self) -> int:
        """Memory power averaged by the driver, mW."""

    @deprecated_alias("supportsGetTotalEnergyConsumption")
    @abc.abstractmethod
    def supports_get_total_energy_consumption(self) -> bool:
        """Whether the GPU has an energy counter (NVIDIA Volta and newer)."""

    @deprecated_alias("getTotalEnergyConsumption")
    @abc.abstractmethod
    def get_total_energy_consumption(self) -> int:
        """Energy since the driver was loaded, mJ."""

    @deprecated_alias("getGpuTemperature")
    @abc.abstractmethod
    def get_gpu_temperature(self) -> int:
        """GPU core temperature, °C."""


class GPUs(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """The GPUs of this process (``CUDA_VISIBLE_DEVICES`` order); methods take a ``gpu_index``
    first and forward to that ``GPU``. A bad index is an IndexError (erg's InvalidArgumentError)."""

    @abc.abstractmethod
    def __init__(self, ensure_homogeneous: bool = False) -> None:
        """Opens the GPUs."""

    def __del__(self) -> None:  # noqa: B027 (the devices are erg's and outlive this object)
        """Nothing to shut down: erg keeps the driver loaded for the process."""

    @property
    @abc.abstractmethod
    def gpus(self) -> Sequence[GPU]:
        """The GPU objects."""

    def __len__(self) -> int:
        return len(self.gpus)

    def _gpu(self, gpu_index: int) -> GPU:
        from ..._common import check_indices

        gpus = self.gpus
        check_indices([gpu_index], len(gpus), "GPU")
        return gpus[gpu_index]

    def _ensure_homogeneous(self) -> None:
        """ZeusGPUHeterogeneousError if the GPUs are not all the same model."""
        names = [gpu.get_name() for gpu in self.gpus]
        if len(set(names)) > 1:
            raise ZeusGPUHeterogeneousError(f"Heterogeneous GPUs found: {names}")

    def _warn_sys_admin(self) -> None:
        """Warns once (``warnings``, as Zeus) if this process lacks SYS_ADMIN."""
        if not getattr(self, "_disable_sys_admin_warning", False) and not has_sys_admin():
            warnings.warn(_SYS_ADMIN_WARNING, stacklevel=2)
            self._disable_sys_admin_warning = True

    @deprecated_alias("getName")
    def get_name(self, gpu_index: int) -> str:
        return self._gpu(gpu_index).get_name()

    @deprecated_alias("getPowerManagementLimitConstraints")
    def get_power_management_limit_constraints(self, gpu_index: int) -> Tuple[int, int]:
        return self._gpu(gpu_index).get_power_management_limit_constraints()

    def get_power_management_limit(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_power_management_limit()

    @deprecated_alias("setPowerManagementLimit")
    def set_power_management_limit(self, gpu_index: int, power_limit_mw: int, block: bool = True) -> None:
        self._gpu(gpu_index).set_power_management_limit(power_limit_mw, block)

    @deprecated_alias("resetPowerManagementLimit")
    def reset_power_management_limit(self, gpu_index: int, block: bool = True) -> None:
        self._gpu(gpu_index).reset_power_management_limit(block)

    @deprecated_alias("setPersistenceMode")
    def set_persistence_mode(self, gpu_index: int, enabled: bool, block: bool = True) -> None:
        self._gpu(gpu_index).set_persistence_mode(enabled, block)

    def get_persistence_mode(self, gpu_index: int) -> bool:
        return self._gpu(gpu_index).get_persistence_mode()

    @deprecated_alias("getSupportedMemoryClocks")
    def get_supported_memory_clocks(self, gpu_index: int) -> list[int]:
        return self._gpu(gpu_index).get_supported_memory_clocks()

    @deprecated_alias("setMemoryLockedClocks")
    def set_memory_locked_clocks(self, gpu_index: int, min_clock_mhz: int, max_clock_mhz: int,
                                 block: bool = True) -> None:
        self._gpu(gpu_index).set_memory_locked_clocks(min_clock_mhz, max_clock_mhz, block)

    @deprecated_alias("resetMemoryLockedClocks")
    def reset_memory_locked_clocks(self, gpu_index: int, block: bool = True) -> None:
        self._gpu(gpu_index).reset_memory_locked_clocks(block)

    @deprecated_alias("getSupportedGraphicsClocks")
    def get_supported_graphics_clocks(self, gpu_index: int, memory_clock_mhz: int | None = None) -> list[int]:
        return self._gpu(gpu_index).get_supported_graphics_clocks(memory_clock_mhz)

    @deprecated_alias("setGpuLockedClocks")
    def set_gpu_locked_clocks(self, gpu_index: int, min_clock_mhz: int, max_clock_mhz: int,
                              block: bool = True) -> None:
        self._gpu(gpu_index).set_gpu_locked_clocks(min_clock_mhz, max_clock_mhz, block)

    @deprecated_alias("resetGpuLockedClocks")
    def reset_gpu_locked_clocks(self, gpu_index: int, block: bool = True) -> None:
        self._gpu(gpu_index).reset_gpu_locked_clocks(block)

    def reset_locked_clocks(self, gpu_index: int, block: bool = True) -> None:
        self._gpu(gpu_index).reset_locked_clocks(block)

    @deprecated_alias("getAveragePowerUsage")
    def get_average_power_usage(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_average_power_usage()

    @deprecated_alias("getInstantPowerUsage")
    def get_instant_power_usage(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_instant_power_usage()

    @deprecated_alias("getAverageMemoryPowerUsage")
    def get_average_memory_power_usage(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_average_memory_power_usage()

    @deprecated_alias("supportsGetTotalEnergyConsumption")
    def supports_get_total_energy_consumption(self, gpu_index: int) -> bool:
        return self._gpu(gpu_index).supports_get_total_energy_consumption()

    @deprecated_alias("getTotalEnergyConsumption")
    def get_total_energy_consumption(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_total_energy_consumption()

    @deprecated_alias("getGpuTemperature")
    def get_gpu_temperature(self, gpu_index: int) -> int:
        return self._gpu(gpu_index).get_gpu_temperature()


class EmptyGPUs(GPUs):
    """No GPUs: length 0, and every method raises ``ValueError("No GPUs available.")``."""

    def __init__(self, ensure_homogeneous: bool = False) -> None:
        pass

    @property
    def gpus(self) -> Sequence[GPU]:
        return []

    def __len__(self) -> int:
        return 0

    def _ensure_homogeneous(self) -> None:
        raise ValueError("No GPUs available to ensure homogeneity.")

    def _warn_sys_admin(self) -> None:
        raise ValueError("No GPUs available to warn about SYS_ADMIN privileges.")


def _no_gpus(method: Any) -> Any:
    @functools.wraps(method)
    def raise_no_gpus(*_args: Any, **_kwargs: Any) -> Any:
        raise ValueError("No GPUs available.")

    return raise_no_gpus


# Every GPU call of EmptyGPUs (with its signature) raises ValueError("No GPUs available.").
for _name, _value in list(vars(GPUs).items()):
    if callable(_value) and not _name.startswith("_"):
        setattr(EmptyGPUs, _name, _no_gpus(_value))
del _name, _value


class ZeusGPUInitError(ZeusBaseGPUError):
    """The GPU library could not be loaded or initialized."""


class ZeusGPUInvalidArgError(ZeusBaseGPUError):
    """An invalid argument (e.g. a power limit out of range)."""


class ZeusGPUNotSupportedError(ZeusBaseGPUError):
    """The GPU or driver cannot do this."""


class ZeusGPUNoPermissionError(ZeusBaseGPUError):
    """The call needs privilege (root or SYS_ADMIN, or ergd)."""


class ZeusGPUAlreadyInitializedError(ZeusBaseGPUError):
    """Already initialized."""


class ZeusGPUNotFoundError(ZeusBaseGPUError):
    """No such GPU or object."""


class ZeusGPUInsufficientSizeError(ZeusBaseGPUError):
    """A buffer was too small."""


class ZeusGPUInsufficientPowerError(ZeusBaseGPUError):
    """The GPU's power cables are not connected properly."""


class ZeusGPUDriverNotLoadedError(ZeusBaseGPUError):
    """The driver is not loaded or not running."""


class ZeusGPUTimeoutError(ZeusBaseGPUError):
    """The GPU did not answer in time."""


class ZeusGPUIRQError(ZeusBaseGPUError):
    """An interrupt request issue."""


class ZeusGPULibraryNotFoundError(ZeusBaseGPUError):
    """The vendor library was not found."""


class ZeusGPUFunctionNotFoundError(ZeusBaseGPUError):
    """The vendor library lacks a function."""


class ZeusGPUCorruptedInfoROMError(ZeusBaseGPUError):
    """The GPU's InfoROM is corrupted."""


class ZeusGPULostError(ZeusBaseGPUError):
    """The GPU fell off the bus."""


class ZeusGPUResetRequiredError(ZeusBaseGPUError):
    """The GPU needs a reset."""


class ZeusGPUOperatingSystemError(ZeusBaseGPUError):
    """The operating system refused the call."""


class ZeusGPULibRMVersionMismatchError(ZeusBaseGPUError):
    """The driver's user and kernel parts do not match."""


class ZeusGPUMemoryError(ZeusBaseGPUError):
    """Out of memory."""


class ZeusGPUUnknownError(ZeusBaseGPUError):
    """Any other error."""


class ZeusGPUHeterogeneousError(ZeusBaseGPUError):
    """The GPUs are not all the same model."""


# erg's error code → the Zeus class of the same meaning (Zeus maps NVML's codes the same way).
_BY_CODE: Dict[str, Type[ZeusBaseGPUError]] = {
    "not_supported": ZeusGPUNotSupportedError,
    "no_permission": ZeusGPUNoPermissionError,
    "not_found": ZeusGPUNotFoundError,
    "invalid_argument": ZeusGPUInvalidArgError,
    "driver_error": ZeusGPUUnknownError,
    "gpu_lost": ZeusGPULostError,
    "io": ZeusGPUOperatingSystemError,
    "unavailable": ZeusGPUDriverNotLoadedError,
    "timeout": ZeusGPUTimeoutError,
    "already_exists": ZeusGPUAlreadyInitializedError,
    "internal": ZeusGPUUnknownError,
}
_BOTH: Dict[Tuple[type, type], type] = {}


def zeus_gpu_error(error: _errors.ErgError) -> ZeusBaseGPUError:
    """The Zeus exception for an erg error, also an instance of the erg error's class (so both
    ``except ZeusGPUNotSupportedError`` and ``except erg.NotSupportedError`` catch it)."""
    zeus_cls = _BY_CODE.get(error.code, ZeusGPUUnknownError)
    key = (zeus_cls, type(error))
    cls = _BOTH.get(key)
    if cls is None:
        cls = type(zeus_cls.__name__, key, {"__module__": __name__, "__doc__": zeus_cls.__doc__})
        _BOTH[key] = cls
    out = cls(str(error))
    out.code = error.code
    return out
