"""Thermally stable energy profiling (Zeus's ``zeus.profile``, over erg's native core).

A GPU's energy per iteration depends on its temperature, so back-to-back measurements of one
workload drift as the GPU heats. This module finds a measurement window and an idle cooldown
long enough that repeated measurements agree, and measures a workload that way::

    import erg, erg.profile
    monitor = erg.EnergyMonitor(gpu_indices=[0], sync_execution_with="torch")
    m_report, c_report = erg.profile.profile_parameters(train_step, monitor)
    print(m_report)                       # one line per duration, [VALID] or [INVALID]
    trial = erg.profile.measure(train_step, monitor, measurement_duration=5.0, cooldown_duration=5.0)
    trial.energy_per_iter                 # joules

A trial: sleep ``cooldown_duration`` → ``num_warmup_iterations`` → synchronize → temperature →
one window over ``ceil(measurement_duration / iteration time)`` iterations (iteration time from
``num_calibration_iterations`` timed calls) → temperature. A swept value is *valid* when the
sample standard deviation of its trials' ``energy_per_iter`` is below ``trial_stddev_threshold``
(joules). Energy is the monitored GPUs' (CPU and DRAM are not included, as in Zeus).

Distributed: every rank calls the same function with its own monitor; with an initialized
``torch.distributed`` group (or an ``all_reduce`` callable) each trial is reduced over the ranks:
energy summed, time the slowest rank's, temperature the ranks' mean. Progress is logged to the
``erg.profile`` logger on rank 0. The loop runs natively with the GIL released, taking it only to
call ``target_function`` (and the synchronization function).

See docs/profiling.md.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import _core, _env

logger = logging.getLogger("erg.profile")

#: all_reduce(value, "sum" | "max") -> the value reduced over every rank.
AllReduce = Callable[[float, str], float]

__all__ = [
    "TrialResult", "SweepResult", "SweepReport", "measure", "profile_measurement_duration",
    "profile_cooldown_duration", "profile_parameters",
]


@dataclass
class TrialResult:
    """One measurement trial (reduced over ranks when distributed). Joules, seconds, °C."""

    energy_per_iter: float
    time_per_iter: float
    total_energy: float
    total_time: float
    iterations: int
    temperature_before: float
    temperature_after: float


@dataclass
class SweepResult:
    """One swept value over its trials: ``energy_std`` is the sample standard deviation of
    ``energy_per_iter``; ``is_valid`` is ``energy_std < trial_stddev_threshold``."""

    measurement_duration: float
    cooldown_duration: float
    trials: List[TrialResult]
    energy_mean: float
    energy_std: float
    avg_temperature_before: float
    avg_temperature_after: float
    avg_total_time: float
    avg_total_energy: float
    is_valid: bool

    def __str__(self) -> str:
        return (
            f"measurement={self.measurement_duration:.1f} s  cooldown={self.cooldown_duration:.1f} s  "
            f"mean={self.energy_mean:.4f} J  std={self.energy_std:.4f} J  "
            f"temp_before={self.avg_temperature_before:.1f} \u00b0C  temp_after={self.avg_temperature_after:.1f} \u00b0C  "
            f"[{'VALID' if self.is_valid else 'INVALID'}]"
        )


@dataclass
class SweepReport:
    """A sweep: ``sweep_param = (name, values)``, ``fixed_param = (name, value)``, one entry per value."""

    sweep_param: Tuple[str, List[float]]
    fixed_param: Tuple[str, float]
    entries: List[SweepResult]

    def __str__(self) -> str:
        name, _ = self.sweep_param
        fixed_name, fixed_value = self.fixed_param
        prefixes = [f"{name}={getattr(e, name):.1f} s" for e in self.entries]
        width = max((len(p) for p in prefixes), default=0)
        lines = [f"Sweep {name} (fixed {fixed_name}={fixed_value:.1f} s):"]
        for prefix, e in zip(prefixes, self.entries):
            lines.append(
                f"  {prefix:<{width}}  mean={e.energy_mean:.4f} J  std={e.energy_std:.4f} J  "
                f"temp_before={e.avg_temperature_before:.1f} \u00b0C  temp_after={e.avg_temperature_after:.1f} \u00b0C  "
                f"[{'VALID' if e.is_valid else 'INVALID'}]"
            )
        return "\n".join(lines)


def _trial(d: dict) -> TrialResult:
    return TrialResult(**d)


def _report(d: dict) -> SweepReport:
    entries = [SweepResult(**{**e, "trials": [_trial(t) for t in e["trials"]]}) for e in d["entries"]]
    name, values = d["sweep_param"]
    return SweepReport(sweep_param=(name, list(values)), fixed_param=tuple(d["fixed_param"]), entries=entries)


def _torch_all_reduce() -> Optional[AllReduce]:
    """torch.distributed's all_reduce when a group is initialized (torch is never imported here)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        return None

    def reduce(value: float, op: str) -> float:
        t = torch.tensor([value], dtype=torch.float64, device="cuda" if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
        return float(t.item())

    return reduce


def _rank_zero() -> bool:
    torch = sys.modules.get("torch")
    if torch is None or not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return True
    return torch.distributed.get_rank() == 0


def _seams(monitor: Any, all_reduce: Optional[AllReduce]) -> Tuple[Any, Any, Any, Any]:
    """(meter, inventory, all_reduce, log) for the native calls. ``monitor`` is an erg
    EnergyMonitor, or a meter object (sync, begin_window, end_window -> (s, J), cancel_window,
    temperature -> °C)."""
    inventory = _env.inventory() if isinstance(monitor, _core.EnergyMonitor) else None
    reduce = all_reduce if all_reduce is not None else _torch_all_reduce()
    log = logger.info if _rank_zero() else None
    return monitor, inventory, reduce, log


def _range(values: Optional[Sequence[float]]) -> Optional[List[float]]:
    return [float(v) for v in values] if values else None  # empty or None: 1, 2, ..., 10 s


def _sweep(
    name: str, target_function: Callable[[], Any], meter: Any, inventory: Any, search_range: Optional[Sequence[float]],
    fixed: float, num_trials: int, num_warmup_trials: int, trial_stddev_threshold: float, num_warmup_iterations: int,
    num_calibration_iterations: int, iteration_duration: Optional[float], reduce: Any, log: Any,
) -> SweepReport:
    """One native sweep of ``name`` (the other duration fixed at ``fixed``), as a SweepReport."""
    return _report(_core.profile.sweep(
        name, target_function, meter, inventory, _range(search_range), float(fixed), num_trials, num_warmup_trials,
        float(trial_stddev_threshold), num_warmup_iterations, num_calibration_iterations,
        None if iteration_duration is None else float(iteration_duration), reduce, log,
    ))


def measure(
    target_function: Callable[[], Any],
    monitor: Any,
    measurement_duration: float,
    cooldown_duration: float,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    warmup_settle_duration: Optional[float] = None,
    all_reduce: Optional[AllReduce] = None,
) -> TrialResult:
    """One thermally stable measurement: calibrate, then one trial. ``warmup_settle_duration``
    (seconds) replaces ``num_warmup_iterations`` before the window (calibration still uses them)."""
    meter, inventory, reduce, log = _seams(monitor, all_reduce)
    return _trial(_core.profile.measure(
        target_function, meter, inventory, float(measurement_duration), float(cooldown_duration),
        num_warmup_iterations, num_calibration_iterations,
        None if warmup_settle_duration is None else float(warmup_settle_duration), reduce, log,
    ))


def profile_measurement_duration(
    target_function: Callable[[], Any],
    monitor: Any,
    measurement_duration_search_range: Optional[Sequence[float]] = None,
    cooldown_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: Optional[float] = None,
    all_reduce: Optional[AllReduce] = None,
) -> SweepReport:
    """Sweeps the measurement window (default 1, 2, ..., 10 s) with the cooldown fixed."""
    meter, inventory, reduce, log = _seams(monitor, all_reduce)
    return _sweep(
        "measurement_duration", target_function, meter, inventory, measurement_duration_search_range, cooldown_duration, num_trials,
        num_warmup_trials, trial_stddev_threshold, num_warmup_iterations, num_calibration_iterations,
        iteration_duration, reduce, log,
    )


def profile_cooldown_duration(
    target_function: Callable[[], Any],
    monitor: Any,
    cooldown_duration_search_range: Optional[Sequence[float]] = None,
    measurement_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: Optional[float] = None,
    all_reduce: Optional[AllReduce] = None,
) -> SweepReport:
    """Sweeps the cooldown (default 1, 2, ..., 10 s) with the measurement window fixed."""
    meter, inventory, reduce, log = _seams(monitor, all_reduce)
    return _sweep(
        "cooldown_duration", target_function, meter, inventory, cooldown_duration_search_range, measurement_duration, num_trials,
        num_warmup_trials, trial_stddev_threshold, num_warmup_iterations, num_calibration_iterations,
        iteration_duration, reduce, log,
    )


def profile_parameters(
    target_function: Callable[[], Any],
    monitor: Any,
    measurement_duration_search_range: Optional[Sequence[float]] = None,
    cooldown_duration_search_range: Optional[Sequence[float]] = None,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    all_reduce: Optional[AllReduce] = None,
) -> Tuple[SweepReport, SweepReport]:
    """Calibrates once, sweeps the window with the cooldown at the largest of its range (after the
    warm-up trials), then the cooldown with the window at the largest of its range. Returns
    ``(measurement_report, cooldown_report)``."""
    meter, inventory, reduce, log = _seams(monitor, all_reduce)
    m, c = _core.profile.profile_parameters(
        target_function, meter, inventory, _range(measurement_duration_search_range),
        _range(cooldown_duration_search_range), num_trials, num_warmup_trials, float(trial_stddev_threshold),
        num_warmup_iterations, num_calibration_iterations, reduce, log,
    )
    return _report(m), _report(c)
