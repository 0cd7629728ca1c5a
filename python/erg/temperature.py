"""TemperatureMonitor: GPU temperature sampled by a native background thread (no processes)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _core, _env

_FOREVER = 9.0e9  # seconds; still fits the native int64 nanoseconds


class TemperatureMonitor:
    """Samples GPU core temperature (°C) every ``period`` seconds in a native thread.

    A reading equal to the GPU's previous one is not stored, so a timeline holds the moments the
    temperature changed. Timestamps are ``time.monotonic()`` seconds (``erg.monotonic()``).
    A GPU whose temperature cannot be read stops being sampled and is listed in ``errors``.
    Call ``stop()`` (or use ``with``).

    Args:
        gpu_indices: GPUs to sample (framework indices); None = all.
        period: seconds between readings; 1 s by default (temperature moves over seconds).
        max_samples: readings kept per GPU (0 = all); the oldest are dropped beyond it.
    """

    def __init__(self, gpu_indices: Optional[Sequence[int]] = None, period: float = 1.0,
                 max_samples: int = 0) -> None:
        self._t = _core.TemperatureMonitor(
            _env.inventory(), list(gpu_indices) if gpu_indices is not None else None, period, max_samples
        )

    def __enter__(self) -> "TemperatureMonitor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops sampling (idempotent); what was stored stays queryable."""
        self._t.stop()

    @property
    def period(self) -> float:
        return self._t.period

    @property
    def gpu_indices(self) -> List[int]:
        return list(self._t.gpu_indices)

    @property
    def errors(self) -> Dict[str, Dict[str, str]]:
        """GPUs that stopped being sampled: ``{"gpu1": {"code": "not_supported", "message": ...}}``."""
        return self._t.errors

    def sampled(self, gpu: int) -> bool:
        """Whether ``gpu`` is monitored and still being sampled."""
        return self._t.sampled(gpu)

    def temperature(self, gpu: int, time: Optional[float] = None) -> int:
        """Latest temperature (°C), or the stored reading nearest to ``time`` (ties: the earlier).
        UnavailableError before the first reading; the GPU's own error once it stopped."""
        return self._t.temperature(gpu, time)

    def timeline(self, gpu: int, start: Optional[float] = None, end: Optional[float] = None) -> Tuple[Any, Any]:
        """``(times, celsius)`` NumPy arrays (float64 seconds, int32 °C) with start <= t <= end."""
        return self._t.timeline(gpu, 0.0 if start is None else start, _FOREVER if end is None else end)
