"""PowerMonitor: a native background sampler (one thread, no processes) with NumPy timelines."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from . import _core, _env

_FOREVER = 9.0e9  # seconds; still fits the native int64 nanoseconds
POWER_DOMAINS = ("device_instant", "device_average", "memory_average")


def monotonic() -> float:
    """The monitors' clock (CLOCK_MONOTONIC, same as ``time.monotonic()``), seconds."""
    return _core.monotonic()


class PowerMonitor:
    """Samples GPU power (and CPU package/DRAM power) in a native thread.

    Timestamps are ``time.monotonic()`` seconds. Timelines come back as two NumPy float64 arrays
    ``(times, watts)`` built in one copy from the native buffer. Call ``stop()`` (or use ``with``).
    """

    def __init__(
        self,
        gpu_indices: Optional[Sequence[int]] = None,
        domains: Optional[Sequence[str]] = None,
        cpus: bool = True,
        period: Optional[float] = None,
        max_samples: int = 0,
    ) -> None:
        self._p = _core.PowerMonitor(
            _env.inventory(),
            list(gpu_indices) if gpu_indices is not None else None,
            [str(getattr(d, "value", d)) for d in (domains or [])],
            cpus,
            period,
            max_samples,
        )

    def __enter__(self) -> "PowerMonitor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._p.stop()

    @property
    def period(self) -> float:
        return self._p.period

    @property
    def gpu_indices(self) -> List[int]:
        return list(self._p.gpu_indices)

    @property
    def domains(self) -> List[str]:
        return list(self._p.domains)

    def sampled(self, gpu: int, domain: str = "device_instant") -> bool:
        return self._p.sampled(gpu, domain)

    def power(self, gpu: int, domain: str = "device_instant", time: Optional[float] = None) -> float:
        """Latest power (W), or the stored sample nearest to ``time``."""
        return self._p.gpu_power(gpu, domain, time)

    def timeline(self, gpu: int, domain: str = "device_instant", start: Optional[float] = None,
                 end: Optional[float] = None) -> Tuple[Any, Any]:
        """``(times, watts)`` NumPy arrays of the samples with start <= t <= end."""
        return self._p.gpu_timeline(gpu, domain, 0.0 if start is None else start,
                                    _FOREVER if end is None else end)

    def energy(self, gpu: int, start: float, end: float, domain: str = "device_instant") -> float:
        """Energy (J) of ``gpu`` from ``start`` to ``end`` (hold-last integration)."""
        return self._p.gpu_energy(gpu, domain, start, end)

    def cpu_power(self, cpu: int, domain: str = "package", time: Optional[float] = None) -> float:
        return self._p.cpu_power(cpu, domain, time)

    def cpu_timeline(self, cpu: int, domain: str = "package", start: Optional[float] = None,
                     end: Optional[float] = None) -> Tuple[Any, Any]:
        return self._p.cpu_timeline(cpu, domain, 0.0 if start is None else start,
                                    _FOREVER if end is None else end)

    def cpu_energy(self, cpu: int, start: float, end: float, domain: str = "package") -> float:
        return self._p.cpu_energy(cpu, domain, start, end)
