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

from erg import _core, _env
from erg._errors import NotFoundError, UnavailableError

from ..exception import ZeusBaseError
from ..utils.framework import sync_execution as sync_execution_fn

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


def _split(d: Dict[str, float], prefix: str) -> Dict[int, float]:
    return {int(k[len(prefix) :]): v for k, v in d.items() if k.startswith(prefix) and k[len(prefix) :].isdigit()}


class EnergyCostMonitor:
    """Windows that report energy and its cost (Zeus's API)."""

    def __init__(
        self,
        electricity_price_provider: OpenEIClient,
        gpu_indices: Optional[List[int]] = None,
        cpu_indices: Optional[List[int]] = None,
        sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
    ) -> None:
        self.electricity_price_provider = electricity_price_provider
        sync_with = sync_execution_with
        self._monitor = _core.carbon.CostMonitor(
            _env.inventory(),
            electricity_price_provider._native(),
            list(gpu_indices) if gpu_indices is not None else None,
            list(cpu_indices) if cpu_indices is not None else None,
            lambda gpus: sync_execution_fn(list(gpus), sync_with=sync_with),
        )
        self.gpu_indices = self._monitor.gpu_indices
        self.cpu_indices = self._monitor.cpu_indices

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        self._monitor.begin_window(key, sync_execution)

    def end_window(self, key: str, sync_execution: bool = True) -> EnergyCostMeasurement:
        d = self._monitor.end_window(key, sync_execution)
        for w in d["warnings"]:
            logger.warning("Measurement window '%s': %s", key, w)
        m = d["measurement"]
        by_device = d["cost_by_device"]
        cpus = bool(self.cpu_indices)
        out = EnergyCostMeasurement(
            time=m.time,
            gpu_energy=dict(m.gpu_energy),
            gpu_energy_cost=_split(by_device, "gpu"),
            cpu_energy=(dict(m.cpu_energy) or None) if cpus else None,
            cpu_energy_cost=(_split(by_device, "cpu") or None) if cpus else None,
            dram_energy=(dict(m.dram_energy) or None) if cpus else None,
            dram_energy_cost=(_split(by_device, "dram") or None) if cpus else None,
        )
        if d["cost"] is None:
            text = "; ".join(d["warnings"]) or "no price"
            cls = ZeusElectricityPriceNotFoundError if "NotFound" in text or "no rate" in text else ZeusElectricityPriceHTTPError
            err = cls(text)
            err.measurement = out  # the energy is kept
            raise err
        return out
