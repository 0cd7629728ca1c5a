"""What Zeus's carbon and price monitors (``carbon.py``, ``price.py``) share over erg's native
CarbonMonitor / CostMonitor: the construction, ``begin_window`` and the measurement
``end_window`` builds from the native result (energy per device, and the per-device value named
by the subclass)."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Literal, Optional, Tuple

from erg import _env

from ..utils.framework import sync_execution as sync_execution_fn


def _split(d: Dict[str, float], prefix: str) -> Dict[int, float]:
    return {int(k[len(prefix) :]): v for k, v in d.items() if k.startswith(prefix) and k[len(prefix) :].isdigit()}


class _WindowMonitor:
    """Subclasses set ``_logger`` (their module's), ``_measurement`` (the dataclass),
    ``_by_device`` (the native result's per-device key) and ``_field`` (the dataclass's
    per-device field suffix, e.g. ``carbon_emission`` for ``gpu_carbon_emission``)."""

    _logger: logging.Logger
    _measurement: Any
    _by_device: str
    _field: str

    def _open(
        self,
        native_monitor: Any,
        provider: Any,
        gpu_indices: Optional[List[int]],
        cpu_indices: Optional[List[int]],
        sync_execution_with: Literal["torch", "jax", "cupy"],
    ) -> None:
        sync_with = sync_execution_with
        self._monitor = native_monitor(
            _env.inventory(),
            provider._native(),
            list(gpu_indices) if gpu_indices is not None else None,
            list(cpu_indices) if cpu_indices is not None else None,
            lambda gpus: sync_execution_fn(list(gpus), sync_with=sync_with),
        )
        self.gpu_indices = self._monitor.gpu_indices
        self.cpu_indices = self._monitor.cpu_indices

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        self._monitor.begin_window(key, sync_execution)

    def _end(self, key: str, sync_execution: bool) -> Tuple[Dict[str, Any], Any]:
        """(the native result, the measurement); warnings are logged."""
        d = self._monitor.end_window(key, sync_execution)
        for w in d["warnings"]:
            self._logger.warning("Measurement window '%s': %s", key, w)
        m = d["measurement"]
        by_device = d[self._by_device]
        cpus = bool(self.cpu_indices)
        f = self._field
        out = self._measurement(
            time=m.time,
            gpu_energy=dict(m.gpu_energy),
            cpu_energy=(dict(m.cpu_energy) or None) if cpus else None,
            dram_energy=(dict(m.dram_energy) or None) if cpus else None,
            **{
                f"gpu_{f}": _split(by_device, "gpu"),
                f"cpu_{f}": (_split(by_device, "cpu") or None) if cpus else None,
                f"dram_{f}": (_split(by_device, "dram") or None) if cpus else None,
            },
        )
        return d, out
