"""RAPL CPU packages (``zeus.device.cpu.rapl``) over erg's devices.

erg reads the powercap tree itself (``/sys/class/powercap``, ``ERG_POWERCAP_ROOT``, the
container mount ``/host/sys/class/powercap``) with wraparound compensated natively (no tracker
process), or asks ergd when this process may not read RAPL. Package index k is the k-th RAPL
package zone (``intel-rapl:k``), as in Zeus.
"""

from __future__ import annotations

from typing import Any, Sequence

from erg import _env, _errors
from ..exception import ZeusBaseCPUError
from .common import CPU, CPUs, CpuDramMeasurement, ZeusCPUInitError, ZeusCPUNoPermissionError

__all__ = [
    "RAPLCPU", "RAPLCPUs", "rapl_is_available",
    "ZeusRAPLNotSupportedError", "ZeusRAPLFileInitError", "ZeusRAPLPermissionError",
]


class ZeusRAPLNotSupportedError(ZeusBaseCPUError):
    """RAPL is not supported on this CPU."""


class ZeusRAPLFileInitError(ZeusBaseCPUError):
    """A RAPL file could not be opened."""


class ZeusRAPLPermissionError(ZeusBaseCPUError):
    """No permission to read RAPL."""


def rapl_is_available() -> bool:
    """Whether erg can read CPU package energy here (RAPL, or ergd)."""
    return bool(_env.inventory().cpus)


class RAPLCPU(CPU):
    """One CPU package."""

    def __init__(self, cpu_index: int, device: Any = None) -> None:
        super().__init__(cpu_index)
        self._d = device if device is not None else _env.inventory().cpus[cpu_index]

    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        """Package and DRAM energy since erg first read them in this process, mJ (differences
        are what count; the origin is erg's)."""
        try:
            cpu_mj = self._d.package_energy_uj() / 1000.0
            dram_mj = self._d.dram_energy_uj() / 1000.0 if self._d.dram else None
        except _errors.NoPermissionError as e:
            raise ZeusCPUNoPermissionError(str(e)) from e
        return CpuDramMeasurement(cpu_mj=cpu_mj, dram_mj=dram_mj)

    def supports_get_dram_energy_consumption(self) -> bool:
        return bool(self._d.dram)


class RAPLCPUs(CPUs):
    """The RAPL packages erg found. ZeusCPUInitError when there is none;
    ZeusCPUNoPermissionError when RAPL exists but may not be read (and no ergd)."""

    def __init__(self) -> None:
        inventory = _env.inventory()
        self._inventory = inventory
        if not inventory.cpus:
            for u in inventory.unavailable:
                if u.source == "rapl" and u.code == "no_permission":
                    raise ZeusCPUNoPermissionError(u.reason)
            why = "; ".join(f"{u.source}: {u.reason}" for u in inventory.unavailable if u.source == "rapl")
            raise ZeusCPUInitError(
                "RAPL unvailable Failed to initialize CPU management library." + (f" ({why})" if why else "")
            )
        self._cpus = [RAPLCPU(i, d) for i, d in enumerate(inventory.cpus)]

    @property
    def cpus(self) -> Sequence[CPU]:
        return self._cpus
