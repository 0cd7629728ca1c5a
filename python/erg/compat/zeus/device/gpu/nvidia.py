"""Zeus's NVIDIA GPU classes (``zeus.device.gpu.nvidia``) over erg's devices.

erg opens the GPUs once per process (NVML through its own loader, the simulated machine, or
ergd for the privileged calls when this process is unprivileged and ERG_DAEMON_SOCK or
ZEUSD_SOCK_PATH names it) and honours ``CUDA_VISIBLE_DEVICES``: GPU index k here is the k-th
visible GPU, as in Zeus.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, List, Sequence, Tuple, TypeVar

from erg import _env, _errors
from .common import GPU, GPUs, ZeusGPUInitError, zeus_gpu_error

__all__ = ["NVIDIAGPU", "NVIDIAGPUs", "nvml_is_available"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _zeus_errors(fn: _F) -> _F:
    """erg errors from the device → the matching Zeus GPU exception (also an erg error)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _errors.ErgError as e:
            raise zeus_gpu_error(e) from e

    return call  # type: ignore[return-value]


def nvml_is_available() -> bool:
    """Whether erg found GPUs in this process (NVML, the simulated machine, or ergd)."""
    return bool(_env.inventory().gpus)


class NVIDIAGPU(GPU):
    """One GPU, through erg. Setters block (``block`` is accepted and ignored, as Zeus does for
    GPUs without non-blocking setters); a limit already in place is not set again."""

    def __init__(self, gpu_index: int, device: Any = None) -> None:
        super().__init__(gpu_index)
        self._d = device if device is not None else _env.inventory().gpus[gpu_index]
        # Through ergd the privileged calls need no SYS_ADMIN here (as Zeus's zeusd GPUs).
        if not self._d.setters_need_privilege:
            self._disable_sys_admin_warning = True

    @property
    def supports_nonblocking_setters(self) -> bool:
        return False

    @_zeus_errors
    def get_name(self) -> str:
        return self._d.name

    @_zeus_errors
    def get_power_management_limit_constraints(self) -> Tuple[int, int]:
        lo, hi = self._d.power_limit_constraints_mw()
        return round(lo), round(hi)

    @_zeus_errors
    def get_power_management_limit(self) -> int:
        return round(self._d.power_limit_mw())

    @_zeus_errors
    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        self._warn_sys_admin()
        self._d.set_power_limit_mw(float(power_limit_mw))

    @_zeus_errors
    def reset_power_management_limit(self, block: bool = True) -> None:
        self._warn_sys_admin()
        self._d.reset_power_limit()

    @_zeus_errors
    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        self._warn_sys_admin()
        self._d.set_persistence_mode(bool(enabled))

    @_zeus_errors
    def get_persistence_mode(self) -> bool:
        return bool(self._d.persistence_mode())

    @_zeus_errors
    def get_supported_memory_clocks(self) -> List[int]:
        return [round(c) for c in self._d.supported_memory_clocks_mhz()]

    @_zeus_errors
    def set_memory_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        self._warn_sys_admin()
        self._d.set_memory_locked_clocks_mhz(float(min_clock_mhz), float(max_clock_mhz))

    @_zeus_errors
    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        self._warn_sys_admin()
        self._d.reset_memory_locked_clocks()

    @_zeus_errors
    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> List[int]:
        # None: at the highest memory clock (NVML itself needs one).
        if memory_clock_mhz is None:
            memory_clock_mhz = max(self.get_supported_memory_clocks())
        return [round(c) for c in self._d.supported_graphics_clocks_mhz(float(memory_clock_mhz))]

    @_zeus_errors
    def set_gpu_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        self._warn_sys_admin()
        self._d.set_gpu_locked_clocks_mhz(float(min_clock_mhz), float(max_clock_mhz))

    @_zeus_errors
    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        self._warn_sys_admin()
        self._d.reset_gpu_locked_clocks()

    @_zeus_errors
    def get_average_power_usage(self) -> int:
        return round(self._d.power_mw("device_average"))

    @_zeus_errors
    def get_instant_power_usage(self) -> int:
        return round(self._d.power_mw("device_instant"))

    @_zeus_errors
    def get_average_memory_power_usage(self) -> int:
        return round(self._d.power_mw("memory_average"))

    def supports_get_total_energy_consumption(self) -> bool:
        return bool(self._d.energy_counter)

    @_zeus_errors
    def get_total_energy_consumption(self) -> int:
        return round(self._d.total_energy_mj())

    @_zeus_errors
    def get_gpu_temperature(self) -> int:
        return int(self._d.temperature_c())


class NVIDIAGPUs(GPUs):
    """This process's GPUs through erg (visible ones, in ``CUDA_VISIBLE_DEVICES`` order).

    ZeusGPUInitError when there is none (the reason erg found is in the message);
    ZeusGPUHeterogeneousError with ``ensure_homogeneous`` when they are not all one model.
    """

    def __init__(self, ensure_homogeneous: bool = False) -> None:
        inventory = _env.inventory()
        self._inventory = inventory
        if not inventory.gpus:
            why = "; ".join(f"{u.source}: {u.reason}" for u in inventory.unavailable)
            raise ZeusGPUInitError(
                "NVML and AMDSMI unavailable. Failed to initialize GPU management library."
                + (f" ({why})" if why else "")
            )
        self._gpus = [NVIDIAGPU(i, d) for i, d in enumerate(inventory.gpus)]
        if ensure_homogeneous:
            self._ensure_homogeneous()

    @property
    def gpus(self) -> Sequence[GPU]:
        return self._gpus
