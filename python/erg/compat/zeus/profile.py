"""Thermally stable energy profiling (Zeus's ``zeus.profile``) over erg's native profiler.

``from zeus.profile import measure, profile_parameters`` becomes ``from erg.compat.zeus.profile
import ...``: the same functions, signatures, defaults, result dataclasses (TrialResult,
SweepResult, SweepReport, field for field) and log records (logger ``zeus.profile``, rank 0). The
trial loop runs natively (erg::profile); it calls back into the ZeusMonitor for its windows
(``__zeus_profile_run_trial``), into ``zeus_monitor.gpus.get_gpu_temperature`` for the
temperature, and into ``utils.framework`` for synchronization and, when distributed, all-reduce.

Deliberate difference (docs/migrating-from-zeus.md): without torch or JAX, Zeus's all-reduce
raises "No framework is available."; here the run is simply not distributed.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, List, Optional, Tuple

from erg import _core
from erg.profile import SweepReport, SweepResult, TrialResult, _range, _report, _sweep, _trial

from .utils import framework

logger = logging.getLogger("zeus.profile")

__all__ = [
    "TrialResult", "SweepResult", "SweepReport", "measure", "profile_measurement_duration",
    "profile_cooldown_duration", "profile_parameters",
]

_WINDOW = "__zeus_profile_run_trial"


class _ZeusMeter:
    """The native profiler's meter over a ZeusMonitor (any object with its methods works, e.g.
    ReplayZeusMonitor)."""

    def __init__(self, zeus_monitor: Any) -> None:
        self.monitor = zeus_monitor

    def sync(self) -> None:
        framework.sync_execution(self.monitor.gpu_indices, sync_with=self.monitor.sync_with)

    def begin_window(self) -> None:
        self.monitor.begin_window(_WINDOW, sync_execution=False)

    def end_window(self) -> Tuple[float, float]:
        m = self.monitor.end_window(_WINDOW)
        return float(m.time), float(m.total_energy)

    def cancel_window(self) -> None:
        try:
            self.monitor.end_window(_WINDOW, sync_execution=False, cancel=True)
        except Exception:  # noqa: BLE001 - best effort while another exception propagates
            pass

    def temperature(self) -> float:
        temps = [self.monitor.gpus.get_gpu_temperature(i) for i in self.monitor.gpu_indices]
        if not temps:
            raise ValueError("ZeusMonitor is monitoring zero GPUs.")
        return sum(temps) / len(temps)


def _distributed() -> bool:
    try:
        return framework.is_distributed()
    except Exception:  # noqa: BLE001 - no framework: one process
        return False


def _seams(zeus_monitor: Any) -> Tuple[Any, Optional[Callable[[float, str], float]], Optional[Callable[[str], None]]]:
    if not _distributed():
        return _ZeusMeter(zeus_monitor), None, logger.info

    def reduce(value: float, op: str) -> float:
        return float(framework.all_reduce([value], op)[0])

    return _ZeusMeter(zeus_monitor), reduce, logger.info if framework.get_rank() == 0 else None


def measure(
    target_function: Callable[[], Any],
    zeus_monitor: Any,
    measurement_duration: float,
    cooldown_duration: float,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    warmup_settle_duration: Optional[float] = None,
) -> TrialResult:
    """One measurement trial with known durations (calibrating first). ValueError for a negative
    ``warmup_settle_duration``."""
    if warmup_settle_duration is not None and warmup_settle_duration < 0:
        raise ValueError("warmup_settle_duration must be non-negative")
    meter, reduce, log = _seams(zeus_monitor)
    return _trial(_core.profile.measure(
        target_function, meter, None, float(measurement_duration), float(cooldown_duration), num_warmup_iterations,
        num_calibration_iterations, None if warmup_settle_duration is None else float(warmup_settle_duration),
        reduce, log,
    ))


def profile_measurement_duration(
    target_function: Callable[[], Any],
    zeus_monitor: Any,
    measurement_duration_search_range: Optional[List[float]] = None,
    cooldown_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: Optional[float] = None,
) -> SweepReport:
    """Sweeps measurement durations (default 1..10 s) with the cooldown fixed."""
    meter, reduce, log = _seams(zeus_monitor)
    return _sweep(
        "measurement_duration", target_function, meter, None, measurement_duration_search_range, cooldown_duration,
        num_trials, num_warmup_trials, trial_stddev_threshold, num_warmup_iterations, num_calibration_iterations,
        iteration_duration, reduce, log,
    )


def profile_cooldown_duration(
    target_function: Callable[[], Any],
    zeus_monitor: Any,
    cooldown_duration_search_range: Optional[List[float]] = None,
    measurement_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: Optional[float] = None,
) -> SweepReport:
    """Sweeps cooldown durations (default 1..10 s) with the measurement duration fixed."""
    meter, reduce, log = _seams(zeus_monitor)
    return _sweep(
        "cooldown_duration", target_function, meter, None, cooldown_duration_search_range, measurement_duration,
        num_trials, num_warmup_trials, trial_stddev_threshold, num_warmup_iterations, num_calibration_iterations,
        iteration_duration, reduce, log,
    )


def profile_parameters(
    target_function: Callable[[], Any],
    zeus_monitor: Any,
    measurement_duration_search_range: Optional[List[float]] = None,
    cooldown_duration_search_range: Optional[List[float]] = None,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
) -> Tuple[SweepReport, SweepReport]:
    """Both sweeps: ``(measurement_sweep_report, cooldown_sweep_report)``."""
    meter, reduce, log = _seams(zeus_monitor)
    m, c = _core.profile.profile_parameters(
        target_function, meter, None, _range(measurement_duration_search_range),
        _range(cooldown_duration_search_range), num_trials, num_warmup_trials, float(trial_stddev_threshold),
        num_warmup_iterations, num_calibration_iterations, reduce, log,
    )
    return _report(m), _report(c)
