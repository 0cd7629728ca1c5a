"""The CPU abstraction (``zeus.device.cpu.common``): ``CpuDramMeasurement`` (mJ), ``CPU`` (one
package), ``CPUs`` (forwarding with a leading ``index``), ``EmptyCPUs`` and the exceptions."""

from __future__ import annotations

import abc
import functools
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..common import DeprecatedAliasABCMeta, deprecated_alias
from ..exception import ZeusBaseCPUError

__all__ = [
    "CpuDramMeasurement", "CPU", "CPUs", "EmptyCPUs",
    "ZeusCPUInitError", "ZeusCPUNoPermissionError", "ZeusCPUNotFoundError",
]


@dataclass
class CpuDramMeasurement:
    """Cumulative package and DRAM energy, mJ (``dram_mj`` None without a DRAM domain)."""

    cpu_mj: float
    dram_mj: Optional[float] = None

    def __sub__(self, other: "CpuDramMeasurement") -> "CpuDramMeasurement":
        dram = None
        if self.dram_mj is not None and other.dram_mj is not None:
            dram = self.dram_mj - other.dram_mj
        return CpuDramMeasurement(cpu_mj=self.cpu_mj - other.cpu_mj, dram_mj=dram)

    def __truediv__(self, other: float) -> "CpuDramMeasurement":
        if other == 0:
            raise ZeroDivisionError("Division by zero is not allowed")
        return CpuDramMeasurement(
            cpu_mj=self.cpu_mj / other, dram_mj=None if self.dram_mj is None else self.dram_mj / other
        )


class ZeusCPUInitError(ZeusBaseCPUError):
    """CPU energy cannot be read on this machine (no RAPL)."""


class ZeusCPUNoPermissionError(ZeusBaseCPUError):
    """RAPL exists but this process may not read it (root, or ergd)."""


class ZeusCPUNotFoundError(ZeusBaseCPUError):
    """No such CPU package."""


class CPU(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """One CPU package."""

    def __init__(self, cpu_index: int) -> None:
        self.cpu_index = cpu_index

    @deprecated_alias("getTotalEnergyConsumption")
    @abc.abstractmethod
    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        """Cumulative package (and DRAM) energy, mJ."""

    @deprecated_alias("supportsGetDramEnergyConsumption")
    @abc.abstractmethod
    def supports_get_dram_energy_consumption(self) -> bool:
        """Whether the package has a DRAM energy domain."""


class CPUs(abc.ABC, metaclass=DeprecatedAliasABCMeta):
    """This machine's CPU packages; methods take the package ``index`` first. A bad index is an
    IndexError (erg's InvalidArgumentError)."""

    @abc.abstractmethod
    def __init__(self) -> None:
        """Opens the packages."""

    def __del__(self) -> None:  # noqa: B027 (the devices are erg's and outlive this object)
        """Nothing to shut down."""

    @property
    @abc.abstractmethod
    def cpus(self) -> Sequence[CPU]:
        """The CPU objects."""

    def __len__(self) -> int:
        return len(self.cpus)

    def _cpu(self, index: int) -> CPU:
        from ..._common import check_indices

        cpus = self.cpus
        check_indices([index], len(cpus), "CPU")
        return cpus[index]

    @deprecated_alias("getTotalEnergyConsumption")
    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        return self._cpu(index).get_total_energy_consumption()

    @deprecated_alias("supportsGetDramEnergyConsumption")
    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        return self._cpu(index).supports_get_dram_energy_consumption()


class EmptyCPUs(CPUs):
    """No CPU packages: length 0, and every method raises ``ValueError("No CPUs available.")``."""

    def __init__(self) -> None:
        pass

    @property
    def cpus(self) -> Sequence[CPU]:
        return []

    def __len__(self) -> int:
        return 0


def _no_cpus(method: Any) -> Any:
    @functools.wraps(method)
    def raise_no_cpus(*_args: Any, **_kwargs: Any) -> Any:
        raise ValueError("No CPUs available.")

    return raise_no_cpus


for _name, _value in list(vars(CPUs).items()):
    if callable(_value) and not _name.startswith("_"):
        setattr(EmptyCPUs, _name, _no_cpus(_value))
del _name, _value
