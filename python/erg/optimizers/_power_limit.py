"""PowerLimitOptimizer over erg's native state machine (erg._core.power_limit)."""

from __future__ import annotations

import atexit
import logging
import math
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from .. import _core, _env

logger = logging.getLogger("erg.optimizers.power_limit")


@dataclass
class PowerLimitMeasurement:
    """Time (s) and energy (J, summed over the job's GPUs) of one limit's profiling window."""

    power_limit: int  # W
    energy: float
    time: float


@dataclass
class Ready:
    next_power_limit: int  # mW
    steps: int


@dataclass
class Warmup:
    current_power_limit: int  # mW
    steps: int


@dataclass
class Profiling:
    current_power_limit: int  # mW
    steps: int


@dataclass
class Done:
    optimal_power_limit: int  # mW


_STATES = {"Ready": Ready, "Warmup": Warmup, "Profiling": Profiling, "Done": Done}


class OptimumSelector(ABC):
    """Picks the power limit (W) from the profile. Subclass it for a selector of your own."""

    @abstractmethod
    def select(self, measurements: List[PowerLimitMeasurement]) -> int:
        """The chosen limit (W); must be one of ``measurements``' limits."""


class _Native(OptimumSelector):
    _native: Any

    def select(self, measurements: List[PowerLimitMeasurement]) -> int:
        pick = self._native.select([(m.power_limit, m.energy, m.time) for m in measurements])
        return int(pick)


class Energy(_Native):
    """The limit with the least energy."""

    def __init__(self) -> None:
        self._native = _core.power_limit.energy_selector()


class Time(_Native):
    """The limit with the least time."""

    def __init__(self) -> None:
        self._native = _core.power_limit.time_selector()


class ZeusCost(_Native):
    """Minimizes eta*E + (1 - eta)*(maxPL * world_size)*T."""

    def __init__(self, eta_knob: float, world_size: int = 1) -> None:
        self._native = _core.power_limit.zeus_cost_selector(eta_knob, world_size)
        self.eta_knob = eta_knob
        self.world_size = world_size


class MaxSlowdownConstraint(_Native):
    """The lowest limit whose time is at most ``factor`` x the time at the maximum limit."""

    def __init__(self, factor: float) -> None:
        self._native = _core.power_limit.max_slowdown_selector(factor)
        self.factor = factor


class _SelectorBridge:
    """What the native optimizer calls for a Python selector: tuples in, watts out."""

    def __init__(self, selector: OptimumSelector) -> None:
        self.selector = selector

    def select(self, measurements: Sequence[Tuple[float, float, float]]) -> float:
        ms = [PowerLimitMeasurement(int(w), e, t) for w, e, t in measurements]
        return float(self.selector.select(ms))


class _MonitorWindows:
    """The monitor's windows as the native optimizer wants them: energy summed over its GPUs."""

    def __init__(self, monitor: Any) -> None:
        self.monitor = monitor

    def begin_window(self, name: str) -> None:
        self.monitor.begin_window(name)

    def end_window(self, name: str) -> Tuple[float, float]:
        m = self.monitor.end_window(name)
        energies = list(m.gpu_energy.values())
        if any(e is None or (isinstance(e, float) and math.isnan(e)) for e in energies):
            raise RuntimeError(f"window {name}: the energy of a GPU is unknown, so the profile would be wrong")
        return float(sum(energies)), float(m.time)

    def cancel_window(self, name: str) -> None:
        self.monitor.end_window(name, cancel=True)


def _torch_reduce(energy: float, time: float) -> Tuple[float, float]:
    """Energy summed and time the maximum over the ranks of an initialized torch.distributed."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return energy, time
    e = torch.tensor([energy], dtype=torch.float64)
    t = torch.tensor([time], dtype=torch.float64)
    if torch.distributed.get_backend() == "nccl":
        e, t = e.cuda(), t.cuda()
    torch.distributed.all_reduce(e, op=torch.distributed.ReduceOp.SUM)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return float(e.item()), float(t.item())


class PowerLimitOptimizer:
    """Profiles GPU power limits during training and keeps the GPUs at the best one.

    Args:
        monitor: an ``erg.EnergyMonitor`` (or a monitor with Zeus's ``begin_window``/``end_window``
            and ``gpu_indices``); its GPUs are the ones whose limit is set (one per rank under
            torch.distributed, where energy and time are all-reduced across ranks).
        optimum_selector: ``ZeusCost(eta_knob=0.5, world_size=len(monitor.gpu_indices))`` by default.
        wait_steps, warmup_steps, profile_steps, pl_step (W), profile_path: as Zeus's.
        reduce: ``f(energy_j, time_s) -> (energy_j, time_s)`` combining the ranks; default:
            torch.distributed all-reduce (sum, max) when initialized, else identity.
        restore_on_signals: restore the default limits on SIGTERM/SIGINT (when the program has
            no handler of its own) and at exit; they are restored by ``restore()``/``close()``,
            a ``with`` block's end and garbage collection too.
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
        reduce: Optional[Callable[[float, float], Tuple[float, float]]] = None,
        restore_on_signals: bool = True,
        log: Optional[Callable[[str], None]] = None,
    ) -> None:
        self.monitor = monitor
        gpu_indices = list(monitor.gpu_indices)
        inventory = _env.inventory()
        gpus = [inventory.gpus[i] for i in gpu_indices]
        self.optimum_selector = optimum_selector or ZeusCost(eta_knob=0.5, world_size=len(gpu_indices))
        sel = self.optimum_selector
        native_sel = sel._native if isinstance(sel, _Native) else _SelectorBridge(sel)
        self._native = _core.power_limit.Optimizer(
            gpus,
            _MonitorWindows(monitor),
            native_sel,
            wait_steps,
            warmup_steps,
            profile_steps,
            float(pl_step),
            str(profile_path) if profile_path is not None else None,
            reduce or _torch_reduce,
            log or logger.info,
            restore_on_signals,
        )
        # At interpreter exit (before the native atexit handler, while Python still runs).
        ref = weakref.ref(self)
        self._atexit = lambda: (lambda o: o.restore() if o is not None else None)(ref())
        atexit.register(self._atexit)

    # --- the training loop's hooks (Zeus's Callback) ---------------------------------------
    def on_step_begin(self) -> None:
        self._native.on_step_begin()

    def on_epoch_end(self) -> None:
        self._native.on_epoch_end()

    def on_step_end(self) -> None:
        """Nothing to do (Zeus's hook)."""

    def on_train_begin(self) -> None:
        """Nothing to do (Zeus's hook)."""

    def on_train_end(self) -> None:
        """Nothing to do (Zeus's hook); the limits stay at the pick until restore()."""

    def on_epoch_begin(self) -> None:
        """Nothing to do (Zeus's hook)."""

    # --- what it knows ----------------------------------------------------------------------
    @property
    def state(self) -> Union[Ready, Warmup, Profiling, Done]:
        name, fields = self._native.state
        return _STATES[name](**fields)

    @property
    def power_limits(self) -> List[int]:
        """The limits profiled, mW, highest first."""
        return list(self._native.power_limits)

    @property
    def measurements(self) -> List[PowerLimitMeasurement]:
        return [PowerLimitMeasurement(int(w), e, t) for w, e, t in self._native.measurements]

    @property
    def optimal_power_limit(self) -> Optional[int]:
        """Done's limit, mW; None before."""
        s = self.state
        return s.optimal_power_limit if isinstance(s, Done) else None

    @property
    def current_power_limit(self) -> int:
        """The limit last set, mW (0 when restored)."""
        return self._native.current_power_limit or 0

    @property
    def limits_set(self) -> List[int]:
        """Every limit the optimizer set, mW, in order."""
        return list(self._native.limits_set)

    def restore(self) -> None:
        """Puts every GPU back at its default limit now; the optimizer sets nothing more."""
        self._native.restore()

    close = restore

    def __enter__(self) -> "PowerLimitOptimizer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.restore()

    def __del__(self) -> None:
        try:
            atexit.unregister(self._atexit)
        except Exception:  # noqa: BLE001 - during interpreter shutdown
            pass
