"""Zeus's power-limit optimizer (``zeus.optimizer.power_limit``) over erg's native one.

Same names, signatures, states (with Zeus's field names, limits in mW), validation errors, logger
name and profile file as Zeus 0.16; the state machine is erg's (erg._core.power_limit), the same
one ``erg.optimizers`` and ``erg optimize power-limit`` run. docs/migrating-from-zeus.md lists
the differences: the default limit (not the maximum) comes back at exit and on SIGTERM/SIGINT,
and ``warmup_steps=0`` is refused at construction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional, Union

from erg._errors import NoPermissionError
from erg.optimizers._power_limit import (
    Done,
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    PowerLimitOptimizer,
    Profiling,
    Ready,
    Time,
    Warmup,
    ZeusCost,
)

from ..callback import Callback
from ..utils.framework import all_reduce, is_distributed
from ..utils.logging import get_logger

__all__ = [
    "OptimumSelector",
    "Energy",
    "Time",
    "ZeusCost",
    "MaxSlowdownConstraint",
    "Ready",
    "Warmup",
    "Profiling",
    "Done",
    "PowerLimitMeasurement",
    "GlobalPowerLimitOptimizer",
    "HFGlobalPowerLimitOptimizer",
]

_NO_PERMISSION = (
    "SYS_ADMIN capability is required to modify GPU power limits. See "
    "https://ml.energy/zeus/getting_started/#system-privileges "
    "for more information."
)


class GpuNoPermissionError(NoPermissionError, RuntimeError):
    """Setting limits needs privilege: the RuntimeError Zeus raises, and erg's NoPermissionError."""


def _reduce(energy: float, time: float) -> "tuple[float, float]":
    """Zeus's aggregation: energy summed, time the maximum over the ranks (identity alone)."""
    try:
        distributed = is_distributed()
    except Exception:  # noqa: BLE001 - no framework at all: one process
        distributed = False
    if not distributed:
        return energy, time
    return float(sum(all_reduce([energy], "sum"))), float(max(all_reduce([time], "max")))


class GlobalPowerLimitOptimizer(Callback):
    """Profiles power limits during training and keeps the GPUs at the optimum (Zeus's class).

    GPU indices come from ``monitor.gpu_indices``; one GPU per rank under torch.distributed.
    """

    def __init__(
        self,
        monitor: Any,
        optimum_selector: Optional[OptimumSelector] = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: Union[str, Path, None] = None,
    ) -> None:
        if wait_steps < 0:
            raise ValueError("wait_steps must be non-negative.")
        if warmup_steps < 0:
            raise ValueError("warmup_steps must be non-negative.")
        if warmup_steps == 0:  # Zeus fails later, at its first Warmup state (a PositiveInt)
            raise ValueError("warmup_steps must be positive.")
        if profile_steps <= 0:
            raise ValueError("profile_steps must be positive.")
        if pl_step <= 0:
            raise ValueError("pl_step must be positive.")
        self.monitor = monitor
        self.optimum_selector = optimum_selector or ZeusCost(eta_knob=0.5, world_size=len(monitor.gpu_indices))
        self.warmup_steps = warmup_steps
        self.profile_steps = profile_steps
        self.pl_step = pl_step * 1000  # mW, as Zeus keeps it
        self.profile_path = Path(profile_path) if isinstance(profile_path, str) else profile_path
        self.logger = get_logger(type(self).__name__)
        try:
            if is_distributed() and len(monitor.gpu_indices) > 1:
                self.logger.warning(
                    "Distributed training is enabled with %d GPUs monitored. For distributed training, it is "
                    "recommended to monitor only one GPU per `ZeusMonitor` instance since "
                    "`GlobalPowerLimitOptimizer` performs an all-reduce operation internally over all devices.",
                    len(monitor.gpu_indices),
                )
        except Exception:  # noqa: BLE001 - no framework: not distributed
            pass
        try:
            self._optimizer = PowerLimitOptimizer(
                monitor,
                self.optimum_selector,
                wait_steps=wait_steps,
                warmup_steps=warmup_steps,
                profile_steps=profile_steps,
                pl_step=pl_step,
                profile_path=self.profile_path,
                reduce=_reduce,
                log=self.logger.info,
            )
        except NoPermissionError as e:
            raise GpuNoPermissionError(_NO_PERMISSION) from e

    def on_epoch_end(self) -> None:
        """Mark the end of a training epoch."""
        self._optimizer.on_epoch_end()

    def on_step_begin(self) -> None:
        """Mark the beginning of a training step."""
        self._optimizer.on_step_begin()

    @property
    def state(self) -> Union[Ready, Warmup, Profiling, Done]:
        return self._optimizer.state

    @property
    def measurements(self) -> List[PowerLimitMeasurement]:
        return self._optimizer.measurements

    @property
    def power_limits(self) -> List[int]:
        """The limits to profile, mW, highest first."""
        return self._optimizer.power_limits

    @property
    def current_power_limit(self) -> int:
        """The limit last set, mW."""
        return self._optimizer.current_power_limit


try:
    from transformers import TrainerCallback

    transformers_available = True
except ImportError:
    transformers_available = False
    TrainerCallback = object  # type: ignore[assignment,misc]


class HFGlobalPowerLimitOptimizer(TrainerCallback):  # type: ignore[misc,valid-type]
    """GlobalPowerLimitOptimizer as a Hugging Face ``TrainerCallback`` (Zeus's class)."""

    def __init__(
        self,
        monitor: Any,
        optimum_selector: Optional[OptimumSelector] = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: Union[str, Path, None] = None,
    ) -> None:
        if not transformers_available:
            raise ImportError(
                "The transformers package is not installed. Please install it to use the HFGlobalPowerLimitOptimizer."
            )
        self.optimizer = GlobalPowerLimitOptimizer(
            monitor=monitor,
            optimum_selector=optimum_selector,
            wait_steps=wait_steps,
            warmup_steps=warmup_steps,
            profile_steps=profile_steps,
            pl_step=pl_step,
            profile_path=profile_path,
        )

    def on_epoch_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Mark the end of a training epoch."""
        self.optimizer.on_epoch_end()

    def on_step_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        """Mark the beginning of a training step."""
        self.optimizer.on_step_begin()
