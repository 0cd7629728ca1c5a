"""Carbon emissions and electricity cost of measurement windows.

    import erg.carbon
    monitor = erg.carbon.CarbonMonitor("DE")        # offline yearly average, with its source
    monitor.begin_window("train")
    ...
    m = monitor.end_window("train")
    print(m.carbon_g, "gCO2eq from", m.total_energy, "J", m.sources, m.warnings)

A window's energy is split at UTC hour boundaries and each hour's energy is multiplied by that
hour's carbon intensity (gCO2eq/kWh) or price. Providers: ``offline(zone)`` (erg's yearly table:
every number names its public source and year), ``from_file(path)`` (your hourly CSV),
``fixed_intensity(g)``, ``electricity_maps(zone=... or lat=..., lon=..., token=...)``; prices:
``fixed_price(per_kwh, currency)``, ``openei(label, api_key=..., time_zone=...)``. A provider that
fails never costs the measurement: the result keeps the energy, the offline average of the zone
stands in for carbon where it can, and ``warnings`` says what happened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generic, List, Optional, Sequence, TypeVar, Union

from . import _core, _env
from ._sync import SyncWith, make_sync

__all__ = [
    "CarbonMonitor",
    "CostMonitor",
    "CarbonMeasurement",
    "CostMeasurement",
    "offline",
    "from_file",
    "fixed_intensity",
    "electricity_maps",
    "fixed_price",
    "openei",
]

logger = logging.getLogger("erg.carbon")

_c = _core.carbon
IntensityProvider = _c.IntensityProvider
PriceProvider = _c.PriceProvider
offline = _c.offline
from_file = _c.from_file
fixed_intensity = _c.fixed_intensity
electricity_maps = _c.electricity_maps
fixed_price = _c.fixed_price
openei = _c.openei


@dataclass
class CarbonMeasurement:
    """One window: ``measurement`` (erg.Measurement, the energy, whole), ``carbon_g`` (gCO2eq over
    the devices whose energy is known; None if some hour had no intensity), per device, per hour,
    and where the numbers came from."""

    measurement: Any
    carbon_g: Optional[float]
    carbon_g_by_device: Dict[str, float]
    hours: List[Dict[str, Any]]
    providers: List[str]
    resolution: Optional[str]
    estimated: bool
    sources: List[str]
    warnings: List[str] = field(default_factory=list)

    @property
    def time(self) -> float:
        return self.measurement.time

    @property
    def total_energy(self) -> float:
        return self.measurement.total_energy


@dataclass
class CostMeasurement:
    """One window: ``measurement`` and ``cost`` in ``currency`` (None if some hour had no price)."""

    measurement: Any
    cost: Optional[float]
    currency: str
    cost_by_device: Dict[str, float]
    hours: List[Dict[str, Any]]
    providers: List[str]
    resolution: Optional[str]
    sources: List[str]
    warnings: List[str] = field(default_factory=list)

    @property
    def time(self) -> float:
        return self.measurement.time

    @property
    def total_energy(self) -> float:
        return self.measurement.total_energy


def _intensity_provider(provider: Union[str, Any]) -> Any:
    if isinstance(provider, str):
        return offline(provider)
    if isinstance(provider, IntensityProvider):
        return provider
    raise TypeError("provider must be a zone name or an erg.carbon provider (offline(), electricity_maps(), ...)")


_M = TypeVar("_M")


class _Windows(Generic[_M]):
    """The window methods CarbonMonitor and CostMonitor share over their native monitor
    (``self._native``); ``end_window`` returns ``self._measurement(**native result)``."""

    _native: Any
    _measurement: Callable[..., _M]

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        self._native.begin_window(name, sync_execution)

    def end_window(self, name: str, sync_execution: bool = True) -> _M:
        d = self._native.end_window(name, sync_execution)
        for w in d["warnings"]:
            logger.warning("window '%s': %s", name, w)
        return self._measurement(**d)

    def cancel_window(self, name: str) -> None:
        self._native.cancel_window(name)

    @property
    def open_windows(self) -> List[str]:
        return self._native.open_windows


class CarbonMonitor(_Windows[CarbonMeasurement]):
    """Windows like erg.EnergyMonitor's that also report gCO2eq.

    Args:
        provider: a zone ("DE": the offline yearly average) or a provider.
        gpu_indices, cpu_indices, sync_execution_with: as erg.EnergyMonitor.
        fallback_zone: the zone whose offline average stands in when the provider fails (default:
            the provider's zone, when it knows one).
    """

    _measurement = CarbonMeasurement

    def __init__(
        self,
        provider: Union[str, Any],
        gpu_indices: Optional[Sequence[int]] = None,
        cpu_indices: Optional[Sequence[int]] = None,
        sync_execution_with: SyncWith = None,
        fallback_zone: str = "",
        use_fallback: bool = True,
    ) -> None:
        self._native = _c.CarbonMonitor(
            _env.inventory(),
            _intensity_provider(provider),
            list(gpu_indices) if gpu_indices is not None else None,
            list(cpu_indices) if cpu_indices is not None else None,
            make_sync(sync_execution_with),
            fallback_zone,
            use_fallback,
        )

    @property
    def gpu_indices(self) -> List[int]:
        return self._native.gpu_indices

    @property
    def cpu_indices(self) -> List[int]:
        return self._native.cpu_indices


class CostMonitor(_Windows[CostMeasurement]):
    """Windows that also report their electricity cost.

    Args:
        provider: a price per kWh (float, in ``currency``) or a price provider.
        kwh_before: energy already used in the billing period (tiered rates count from it).
    """

    _measurement = CostMeasurement

    def __init__(
        self,
        provider: Union[float, Any],
        gpu_indices: Optional[Sequence[int]] = None,
        cpu_indices: Optional[Sequence[int]] = None,
        sync_execution_with: SyncWith = None,
        currency: str = "USD",
        kwh_before: float = 0.0,
    ) -> None:
        if isinstance(provider, (int, float)):
            provider = fixed_price(float(provider), currency)
        self._native = _c.CostMonitor(
            _env.inventory(),
            provider,
            list(gpu_indices) if gpu_indices is not None else None,
            list(cpu_indices) if cpu_indices is not None else None,
            make_sync(sync_execution_with),
            kwh_before,
        )
