"""The SoC abstraction (``zeus.device.soc.common``): ``SoC``, ``SoCMeasurement``, ``EmptySoC``
and ``ZeusSoCInitError``. erg has no SoC backend yet (Apple silicon, Jetson), so ``get_soc()``
raises ZeusSoCInitError and ZeusMonitor holds an EmptySoC, as Zeus does on a GPU server."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Dict, Set

from ..exception import ZeusBaseSoCError

__all__ = ["SoC", "SoCMeasurement", "EmptySoC", "ZeusSoCInitError"]


class ZeusSoCInitError(ZeusBaseSoCError):
    """No SoC that can be measured was found."""


@dataclass
class SoCMeasurement(abc.ABC):
    """Energy of a SoC's subsystems (mJ); the fields are each SoC's."""

    @abc.abstractmethod
    def __sub__(self, other: "SoCMeasurement") -> "SoCMeasurement":
        """Field-wise difference."""

    @abc.abstractmethod
    def zero_all_fields(self) -> None:
        """Sets every field to zero (a cancelled window)."""


class SoC(abc.ABC):
    """A monolithic SoC's energy with named windows (``begin_window``/``end_window``)."""

    def __init__(self) -> None:
        self.measurement_states: Dict[str, SoCMeasurement] = {}

    @abc.abstractmethod
    def get_available_metrics(self) -> Set[str]:
        """The metrics this SoC can observe."""

    @abc.abstractmethod
    def get_total_energy_consumption(self) -> SoCMeasurement:
        """Cumulative energy since an arbitrary origin, mJ."""

    def begin_window(self, key: str, restart: bool = False) -> None:
        if key in self.measurement_states and not restart:
            raise ValueError(f"Measurement window '{key}' already exists")
        self.measurement_states[key] = self.get_total_energy_consumption()

    def end_window(self, key: str) -> SoCMeasurement:
        try:
            start = self.measurement_states.pop(key)
        except KeyError:
            raise ValueError(f"Measurement window '{key}' does not exist") from None
        return self.get_total_energy_consumption() - start


class EmptySoC(SoC):
    """No SoC: no metrics, and every measurement raises ``ValueError("No SoC is available.")``."""

    def __init__(self) -> None:
        super().__init__()

    def get_available_metrics(self) -> Set[str]:
        return set()

    def get_total_energy_consumption(self) -> SoCMeasurement:
        raise ValueError("No SoC is available.")

    def begin_window(self, key: str, restart: bool = False) -> None:
        raise ValueError("No SoC is available.")

    def end_window(self, key: str) -> SoCMeasurement:
        raise ValueError("No SoC is available.")
