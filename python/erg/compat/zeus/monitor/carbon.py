"""Zeus's carbon emission monitor (``zeus.monitor.carbon``) on erg's native CarbonMonitor.

    from erg.compat.zeus.monitor.carbon import CarbonEmissionMonitor, ElectrictyMapsClient

Differences from Zeus, on purpose (docs/migrating-from-zeus.md): windows count their energy from
``begin_window`` (no background process that starts ~1.3 s late); every request has a timeout and
its HTTP status checked; a provider failure, or a history missing the current hour, never hangs
``end_window``: the offline yearly average of the zone stands in (a warning on the
``zeus.monitor.carbon`` logger), and where nothing can stand in, ``end_window`` raises
``ZeusCarbonIntensityNotFoundError`` whose ``measurement`` holds the energy. ElectricityMaps'
token is sent in its ``auth-token`` header (``token=`` or ``$ELECTRICITYMAPS_TOKEN``).
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Dict, List, Literal, Optional, Tuple

from erg import _core
from erg._errors import ErgError, NotFoundError, UnavailableError

from ..exception import ZeusBaseError
from ._windows import _WindowMonitor

__all__ = [
    "ZeusCarbonIntensityHTTPError",
    "ZeusCarbonIntensityNotFoundError",
    "CarbonIntensityProvider",
    "ElectrictyMapsClient",
    "CarbonEmissionMeasurement",
    "CarbonEmissionMonitor",
]

logger = logging.getLogger("zeus.monitor.carbon")


class ZeusCarbonIntensityHTTPError(ZeusBaseError, UnavailableError):
    """The carbon intensity service failed (also erg's UnavailableError)."""


class ZeusCarbonIntensityNotFoundError(ZeusBaseError, NotFoundError):
    """No carbon intensity for the location or hour (also erg's NotFoundError)."""


class CarbonIntensityProvider(abc.ABC):
    """A source of carbon intensity (gCO2eq/kWh). Subclasses give the current value and a dict of
    recent hourly values keyed by (timezone-aware UTC) datetimes."""

    @abc.abstractmethod
    def get_current_carbon_intensity(self) -> float: ...

    @abc.abstractmethod
    def get_recent_carbon_intensity(self) -> Dict[datetime, float]: ...

    @property
    @abc.abstractmethod
    def update_period(self) -> timedelta: ...

    @property
    @abc.abstractmethod
    def history_length(self) -> int: ...

    def _native(self) -> object:
        """The native provider erg's monitor asks: a Python one is called back per hour."""
        cache: Dict[float, float] = {}

        def per_hour(hour_s: float) -> float:
            if hour_s not in cache:
                now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
                if hour_s >= now.timestamp():
                    return float(self.get_current_carbon_intensity())
                for t, v in self.get_recent_carbon_intensity().items():
                    t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
                    cache[t.replace(minute=0, second=0, microsecond=0).timestamp()] = float(v)
            if hour_s not in cache:
                raise ZeusCarbonIntensityNotFoundError(f"no carbon intensity for the hour starting at {hour_s}")
            return cache[hour_s]

        return _core.carbon.callable_intensity(type(self).__name__, "", per_hour)


def _zeus_error(e: ErgError) -> ZeusBaseError:
    if isinstance(e, NotFoundError):
        return ZeusCarbonIntensityNotFoundError(str(e))
    return ZeusCarbonIntensityHTTPError(str(e))


class ElectrictyMapsClient(CarbonIntensityProvider):  # (sic: Zeus's spelling)
    """ElectricityMaps API v3 for a location (lat, lon). erg adds ``token`` (sent in the
    ``auth-token`` header; default ``$ELECTRICITYMAPS_TOKEN``), ``base_url`` and ``timeout_s``."""

    def __init__(
        self,
        location: Tuple[float, float],
        estimate: bool = False,
        emission_factor_type: Literal["direct", "lifecycle"] = "direct",
        token: str = "",
        base_url: Optional[str] = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.lat, self.long = location
        self.estimate = estimate
        self.emission_factor_type = emission_factor_type
        self._provider = _core.carbon.electricity_maps(
            lat=float(self.lat),
            lon=float(self.long),
            token=token,
            estimations=estimate,
            emission_factor_type=emission_factor_type,
            base_url=base_url,
            timeout_s=timeout_s,
        )

    def _hour(self, t: datetime) -> float:
        return t.replace(minute=0, second=0, microsecond=0).timestamp()

    def get_current_carbon_intensity(self) -> float:
        try:
            return self._provider.intensity(datetime.now(timezone.utc).timestamp())["g_per_kwh"]
        except ErgError as e:
            raise _zeus_error(e) from e

    def get_recent_carbon_intensity(self) -> Dict[datetime, float]:
        now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
        out: Dict[datetime, float] = {}
        errors: List[str] = []
        for k in range(self.history_length, 0, -1):
            t = now - timedelta(hours=k)
            try:
                out[t] = self._provider.intensity(t.timestamp())["g_per_kwh"]
            except ErgError as e:
                errors.append(str(e))
        if not out and errors:
            raise ZeusCarbonIntensityHTTPError(errors[-1])
        return out

    @property
    def update_period(self) -> timedelta:
        return timedelta(hours=1)

    @property
    def history_length(self) -> int:
        return 24

    def _native(self) -> object:
        return self._provider


@dataclass
class CarbonEmissionMeasurement:
    """Time (s), energy (J) and emissions (gCO2eq) per GPU, CPU package and DRAM."""

    time: float
    gpu_energy: Dict[int, float]
    gpu_carbon_emission: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    cpu_carbon_emission: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None
    dram_carbon_emission: Optional[Dict[int, float]] = None


class CarbonEmissionMonitor(_WindowMonitor):
    """Windows that report energy and carbon emissions (Zeus's API)."""

    _logger = logger
    _measurement = CarbonEmissionMeasurement
    _by_device = "carbon_g_by_device"
    _field = "carbon_emission"

    def __init__(
        self,
        carbon_intensity_provider: CarbonIntensityProvider,
        gpu_indices: Optional[List[int]] = None,
        cpu_indices: Optional[List[int]] = None,
        sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
    ) -> None:
        self.carbon_intensity_provider = carbon_intensity_provider
        self._open(_core.carbon.CarbonMonitor, carbon_intensity_provider, gpu_indices, cpu_indices, sync_execution_with)

    def end_window(self, key: str, sync_execution: bool = True) -> CarbonEmissionMeasurement:
        d, out = self._end(key, sync_execution)
        if d["carbon_g"] is None:
            err = ZeusCarbonIntensityNotFoundError("; ".join(d["warnings"]) or "no carbon intensity")
            err.measurement = out  # the energy is kept
            raise err
        return out
