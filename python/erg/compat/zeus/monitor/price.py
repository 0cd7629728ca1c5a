"""Zeus's energy cost monitor (``zeus.monitor.price``) on erg's native CostMonitor.

    from erg.compat.zeus.monitor.price import EnergyCostMonitor, OpenEIClient

Differences from Zeus, on purpose (docs/migrating-from-zeus.md): the cost applies OpenEI's tiers
(``rate + adj`` per kWh, each tier up to its ``max`` kWh of use counted from the window's start)
instead of the first tier's ``rate`` only; weekday/weekend schedules are read in the utility's
time zone (``time_zone=``, default the machine's) instead of UTC; every request has a timeout and
its status checked; the API key is yours (``api_key=`` or ``$OPENEI_API_KEY``), not a built-in
one. A failed price never hangs ``end_window``: it raises ``ZeusElectricityPriceNotFoundError`` or
``ZeusElectricityPriceHTTPError`` whose ``measurement`` holds the energy.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, List, Literal, Optional, Tuple

from erg import _core
from erg._errors import NotFoundError, UnavailableError

from ..exception import ZeusBaseError
from ._windows import _WindowMonitor

__all__ = [
    "ZeusElectricityPriceHTTPError",
    "ZeusElectricityPriceNotFoundError",
    "OpenEIClient",
    "EnergyCostMeasurement",
    "EnergyCostMonitor",
]

logger = logging.getLogger("zeus.monitor.price")


class ZeusElectricityPriceHTTPError(ZeusBaseError, UnavailableError):
    """The price service failed (also erg's UnavailableError)."""


class ZeusElectricityPriceNotFoundError(ZeusBaseError, NotFoundError):
    """No price for the rate or hour (also erg's NotFoundError)."""


class OpenEIClient:
    """An OpenEI URDB rate, by ``label``. ``location``, ``sector`` and ``radius`` are kept for
    Zeus's signature; the rate is fetched by its label. erg adds ``api_key``, ``time_zone``,
    ``base_url`` and ``timeout_s``."""

    def __init__(
        self,
        location: Tuple[float, float],
        label: str,
        sector: Literal["Residential", "Commercial", "Industrial", "Lighting"] = "Residential",
        radius: int = 0,
        api_key: str = "",
        time_zone: str = "",
        base_url: Optional[str] = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.lat, self.long = location
        self.label = label
        self.sector = sector
        self.radius = radius
        self._provider = _core.carbon.openei(
            label, api_key=api_key, base_url=base_url, time_zone=time_zone, timeout_s=timeout_s
        )

    def _native(self) -> object:
        return self._provider


@dataclass
class EnergyCostMeasurement:
    """Time (s), energy (J) and cost (in the rate's currency) per GPU, CPU package and DRAM."""

    time: float
    gpu_energy: Dict[int, float]
    gpu_energy_cost: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    cpu_energy_cost: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None
    dram_energy_cost: Optional[Dict[int, float]] = None


class EnergyCostMonitor(_WindowMonitor):
    """Windows that report energy and its cost (Zeus's API)."""

    _logger = logger
    _measurement = EnergyCostMeasurement
    _by_device = "cost_by_device"
    _field = "energy_cost"

    def __init__(
        self,
        electricity_price_provider: OpenEIClient,
        gpu_indices: Optional[List[int]] = None,
        cpu_indices: Optional[List[int]] = None,
        sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
    ) -> None:
        self.electricity_price_provider = electricity_price_provider
        self._open(_core.carbon.CostMonitor, electricity_price_provider, gpu_indices, cpu_indices, sync_execution_with)

    def end_window(self, key: str, sync_execution: bool = True) -> EnergyCostMeasurement:
        d, out = self._end(key, sync_execution)
        if d["cost"] is None:
            text = "; ".join(d["warnings"]) or "no price"
            cls = ZeusElectricityPriceNotFoundError if "NotFound" in text or "no rate" in text else ZeusElectricityPriceHTTPError
            err = cls(text)
            err.measurement = out  # the energy is kept
            raise err
        return out
