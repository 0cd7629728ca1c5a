"""TemperatureMonitor (``zeus.monitor.temperature``) over erg's native sampler (erg.TemperatureMonitor):
one thread, no process. Timestamps are ``time.time()`` seconds and temperatures int °C, as Zeus."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from erg import _core, _env
from erg._errors import ErgError, InvalidArgumentError

from .._common import check_indices, native_span as _native_span, wall_offset, within as _within
from ..device import get_gpus

__all__ = ["TemperatureSample", "TemperatureMonitor"]

logger = logging.getLogger("zeus.monitor.temperature")

@dataclass
class TemperatureSample:
    """One reading (``timestamp`` from ``time.time()``, ``temperature_c`` in °C)."""

    timestamp: float
    gpu_index: int
    temperature_c: int


class TemperatureMonitor:
    """Samples GPU temperature every ``update_period`` seconds (1 s by default) in the
    background, storing a reading only when it changed.

    Errors: ValueError for ``gpu_indices=[]``; IndexError (erg's InvalidArgumentError) for a GPU
    index that does not exist; ZeusGPUInitError when there is no GPU. A GPU whose temperature
    cannot be read is logged (warning) and not polled again.
    """

    def __init__(
        self,
        gpu_indices: Optional[List[int]] = None,
        update_period: float = 1.0,
        max_samples_per_gpu: Optional[int] = None,
    ) -> None:
        if gpu_indices is not None and not gpu_indices:
            raise InvalidArgumentError("`gpu_indices` must be either `None` or non-empty")
        gpus = get_gpus()
        self.gpu_indices: List[int] = (
            check_indices(gpu_indices, len(gpus), "GPU") if gpu_indices is not None else list(range(len(gpus)))
        )
        if not self.gpu_indices:
            raise InvalidArgumentError("At least one GPU index must be specified")
        logger.info("Monitoring temperature of GPUs %s", self.gpu_indices)
        self.update_period = update_period
        self._t = _core.TemperatureMonitor(_env.inventory(), self.gpu_indices, float(update_period),
                                           max_samples_per_gpu or 0)
        self._offset = wall_offset()  # time.time() = monitor clock + offset
        for device, error in self._t.errors.items():
            logger.warning("GPU %d temperature reading not supported: %s", int(device[3:]), error["message"])

    def stop(self) -> None:
        """Stops sampling (idempotent). What was sampled stays queryable."""
        self._t.stop()

    def get_temperature_timeline(
        self, gpu_index: Optional[int] = None, start_time: Optional[float] = None, end_time: Optional[float] = None
    ) -> Dict[int, List[Tuple[float, int]]]:
        """``{gpu: [(time.time() timestamp, °C), ...]}`` of the readings with start <= t <= end."""
        start, end = _native_span(start_time, end_time, self._offset)
        result: Dict[int, List[Tuple[float, int]]] = {}
        for gpu in [gpu_index] if gpu_index is not None else self.gpu_indices:
            if gpu not in self.gpu_indices:
                continue
            t, c = self._t.timeline(gpu, start, end)
            result[gpu] = _within(zip((t + self._offset).tolist(), c.tolist()), start_time, end_time)
        return result

    def get_temperature(self, time: Optional[float] = None) -> Optional[Dict[int, int]]:
        """``{gpu: °C}``: the latest reading, or the one nearest to ``time`` (``time.time()``
        seconds; a tie goes to the earlier). None if some GPU has no reading."""
        t = None if time is None else time - self._offset
        out: Dict[int, int] = {}
        for gpu in self.gpu_indices:
            try:
                out[gpu] = self._t.temperature(gpu, t)
            except ErgError:
                return None
        return out
