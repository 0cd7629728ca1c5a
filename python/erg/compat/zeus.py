"""Zeus-compatible names (ml-energy/zeus v0.16 ``zeus.monitor``): change only the import.

    from erg.compat.zeus import ZeusMonitor      # was: from zeus.monitor import ZeusMonitor

Same signatures, defaults, error messages (``ValueError("Measurement window 'x' already
exists")``...), CSV log format and zero-energy warning as Zeus. GPU energy figures are plain
counter differences, as in Zeus. Deliberate differences: PowerMonitor samples in one native
thread (no spawned processes) and ``get_energy`` integrates with hold-last, so a window of
constant power is not 0 J (Zeus quirk, reference §12.3).
"""

from __future__ import annotations

import enum
import os
import time as _time
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Dict, List, Literal, Optional, Union

from .. import _core, _env
from .._sync import make_sync

__all__ = ["ZeusMonitor", "Measurement", "PowerMonitor", "PowerDomain", "PowerSample"]

ZERO_ENERGY_WARNING = (
    "The energy consumption of one or more GPUs was measured as zero. This means that the time duration "
    "of the measurement window was shorter than the GPU's energy counter update period. Consider turning "
    "on the `approx_instant_energy` option in `ZeusMonitor`, which approximates the energy consumption of "
    "a short time window as instant power draw x window duration."
)


@dataclass
class Measurement:
    """Zeus's Measurement: seconds and joules, GPU energy keyed by framework GPU index."""

    time: float
    gpu_energy: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None
    soc_energy: None = None

    @cached_property
    def total_energy(self) -> float:
        """Sum of GPU energy only (as Zeus)."""
        return sum(self.gpu_energy.values())


class ZeusMonitor:
    """Zeus's ZeusMonitor over erg's native EnergyMonitor."""

    def __init__(
        self,
        gpu_indices: Optional[List[int]] = None,
        cpu_indices: Optional[List[int]] = None,
        approx_instant_energy: bool = False,
        log_file: Union[str, Path, None] = None,
        sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
    ) -> None:
        self.approx_instant_energy = approx_instant_energy
        self.sync_with = sync_execution_with
        self._sync_fn = None
        self._sync_ready = False
        self._m = _core.EnergyMonitor(
            _env.inventory(),
            list(gpu_indices) if gpu_indices is not None else None,
            list(cpu_indices) if cpu_indices is not None else None,
            approx_instant_energy,
            False,  # extrapolate_counters: plain counter differences, as Zeus
            None,
            None,  # sync: done here, with Zeus's timing
            False,  # settle: end_window returns at once, as Zeus
            True,  # follow_counters: a light reader per counter period sees a counter that steps
            # back or restarts inside a window (Zeus, reading only at the edges, misses it)
        )
        self.gpu_indices: List[int] = list(self._m.gpu_indices)
        self.cpu_indices: List[int] = list(self._m.cpu_indices)
        self.log_file = None
        if log_file is not None:
            path = Path(log_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.log_file = open(path, "w")  # noqa: SIM115 (kept open like Zeus)
            self.log_file.write(
                "start_time,window_name,elapsed_time"
                + "".join(f",gpu{i}_energy" for i in self.gpu_indices)
                + "\n"
            )
            self.log_file.flush()

    def _sync(self) -> None:
        # Framework imported on first use (not at construction), as Zeus; no CUDA → no-op.
        if not self._sync_ready:
            self._sync_fn = make_sync(self.sync_with, strict=False)
            self._sync_ready = True
        if self._sync_fn is not None and self.gpu_indices:
            self._sync_fn(self.gpu_indices)

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        if sync_execution:
            self._sync()
        self._m.begin_window(key, False, restart)  # synchronized above, the Zeus way

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        if key not in self._m.open_windows:
            raise ValueError(f"Measurement window '{key}' does not exist")
        if sync_execution:
            self._sync()
        if cancel:
            self._m.cancel_window(key)
            return Measurement(
                time=0.0,
                gpu_energy={gpu: 0.0 for gpu in self.gpu_indices},
                cpu_energy={cpu: 0.0 for cpu in self.cpu_indices},
            )
        m = self._m.end_window(key, False)
        # A GPU whose energy is unknown (lost, or unreadable at an edge) is NaN in Zeus's float
        # dict, never 0.0, with a warning naming it; erg's own Measurement says more.
        gpu_energy = {g: (float("nan") if e is None else e) for g, e in m.gpu_energy.items()}
        for device, message in m.errors.items():
            if device.startswith("gpu") and m.gpu_energy.get(int(device[3:])) is None:
                warnings.warn(f"energy of {device} unknown (NaN): {message}", stacklevel=2)
        if not self.approx_instant_energy and any(e == 0.0 for e in gpu_energy.values()):
            warnings.warn(ZERO_ENERGY_WARNING, stacklevel=1)
        if self.log_file is not None:
            self.log_file.write(
                f"{m.start_wall},{key},{m.time},"
                + ",".join(str(gpu_energy[gpu]) for gpu in self.gpu_indices)
                + "\n"
            )
            self.log_file.flush()
        return Measurement(
            time=m.time,
            gpu_energy=gpu_energy,
            cpu_energy=m.cpu_energy or None,
            dram_energy=m.dram_energy or None,
        )

    def reset_windows(self) -> None:
        """Cancels every active window."""
        self._m.reset_windows()


class PowerDomain(enum.Enum):
    DEVICE_INSTANT = "device_instant"
    DEVICE_AVERAGE = "device_average"
    MEMORY_AVERAGE = "memory_average"


@dataclass
class PowerSample:
    timestamp: float
    gpu_index: int
    power_mw: float


def _wall_offset() -> float:
    """time.time() − monitor clock, to report Zeus's time.time() timestamps."""
    return _time.time() - _core.monotonic()


class PowerMonitor:
    """Zeus's PowerMonitor over erg's native sampler (one thread, no processes)."""

    def __init__(
        self,
        gpu_indices: Optional[List[int]] = None,
        update_period: Optional[float] = None,
        max_samples_per_gpu: Optional[int] = None,
        power_domains: Optional[List[Union[PowerDomain, str]]] = None,
    ) -> None:
        if gpu_indices is not None and not gpu_indices:
            raise ValueError("`gpu_indices` must be either `None` or non-empty")
        if power_domains is not None and not power_domains:
            raise ValueError("`power_domains` must be either `None` or non-empty")
        if update_period is not None and update_period < 0.05:
            warnings.warn(
                f"An update period of {update_period} might be too fast, which may lead to unexpected "
                "accuracy issues.",
                stacklevel=2,
            )
        domains = [] if power_domains is None else list(dict.fromkeys(PowerDomain(d).value for d in power_domains))
        self._p = _core.PowerMonitor(
            _env.inventory(), list(gpu_indices) if gpu_indices is not None else None, domains, False,
            update_period, max_samples_per_gpu or 0,
        )
        self.gpu_indices: List[int] = list(self._p.gpu_indices)
        self.update_period: float = self._p.period
        self.power_domains: List[PowerDomain] = [PowerDomain(d) for d in self._p.domains]
        if PowerDomain.DEVICE_INSTANT not in self.power_domains:
            warnings.warn("DEVICE_INSTANT power domain is not being monitored.", stacklevel=2)

    def stop(self) -> None:
        self._p.stop()

    def _check(self, power_domain: Union[PowerDomain, str], hint: str = "") -> PowerDomain:
        d = PowerDomain(power_domain)
        if d not in self.power_domains:
            raise ValueError(
                f"Power domain {d.value} is not being monitored. "
                f"Monitored domains: {[x.value for x in self.power_domains]}{hint}"
            )
        return d

    def get_power_timeline(
        self,
        power_domain: Union[PowerDomain, str],
        gpu_index: Optional[int] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> Dict[int, List[tuple]]:
        d = self._check(power_domain)
        off = _wall_offset()
        start = 0.0 if start_time is None else start_time - off
        end = 9.0e9 if end_time is None else end_time - off
        result = {}
        for gpu in [gpu_index] if gpu_index is not None else self.gpu_indices:
            if not self._p.sampled(gpu, d.value):
                continue
            t, w = self._p.gpu_timeline(gpu, d.value, start, end)
            result[gpu] = list(zip((t + off).tolist(), w.tolist()))
        return result

    def get_all_power_timelines(
        self, gpu_index: Optional[int] = None, start_time: Optional[float] = None, end_time: Optional[float] = None
    ) -> Dict[str, Dict[int, List[tuple]]]:
        return {d.value: self.get_power_timeline(d, gpu_index, start_time, end_time) for d in self.power_domains}

    def get_energy(
        self, start_time: float, end_time: float, power_domain: Union[PowerDomain, str, None] = None
    ) -> Optional[Dict[int, float]]:
        if power_domain is None:
            if PowerDomain.DEVICE_INSTANT in self.power_domains:
                power_domain = PowerDomain.DEVICE_INSTANT
            elif PowerDomain.DEVICE_AVERAGE in self.power_domains:
                power_domain = PowerDomain.DEVICE_AVERAGE
            else:
                raise ValueError(
                    "Neither GPUPowerDomain.DEVICE_INSTANT nor GPUPowerDomain.DEVICE_AVERAGE is being monitored. "
                    "Cannot compute energy usage.",
                )
        d = self._check(power_domain)
        off = _wall_offset()
        out: Dict[int, float] = {}
        for gpu in self.gpu_indices:
            if not self._p.sampled(gpu, d.value):
                continue
            try:
                out[gpu] = self._p.gpu_energy(gpu, d.value, start_time - off, end_time - off)
            except Exception:  # no sample yet
                return None
        return out or None

    def get_power(
        self, time: Optional[float] = None, power_domain: Union[PowerDomain, str] = PowerDomain.DEVICE_INSTANT
    ) -> Optional[Dict[int, float]]:
        d = self._check(power_domain, ". Pass one of the monitored domains to the `power_domain` parameter.")
        t = None if time is None else time - _wall_offset()
        out: Dict[int, float] = {}
        for gpu in self.gpu_indices:
            try:
                out[gpu] = self._p.gpu_power(gpu, d.value, t)
            except Exception:
                return None
        return out


del field, os
