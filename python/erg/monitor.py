"""EnergyMonitor: named measurement windows (nested, overlapping, from any thread)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence, TypeVar

from . import _core, _env
from ._sync import SyncWith, make_sync

Measurement = _core.Measurement
F = TypeVar("F", bound=Callable[..., Any])


class EnergyMonitor(_core.EnergyMonitor):
    """Measures time and energy of named windows over GPUs and CPU packages.

    Args:
        gpu_indices: GPUs to monitor (framework indices, i.e. CUDA_VISIBLE_DEVICES order); None = all.
        cpu_indices: CPU packages (RAPL) to monitor; None = all available.
        approx_instant_energy: for a GPU whose counter did not move, report instant power x time.
        sync_execution_with: "torch", "jax", "cupy", a callable ``f(gpu_indices)``, or None (no
            synchronization; the default). "torch" without CUDA raises UnavailableError.
        extrapolate_counters: estimate each GPU counter's value at the edge instant (it updates
            only every ~100 ms): exact to the sensor at the begin edge, extrapolated at the end
            edge unless ``settle``. False gives plain counter differences, as Zeus.
        log_file: append one CSV row per ended window.
        settle: ``end_window`` waits (about one counter period, ~0.1 s, at most three) for every
            GPU counter's next update, so the end edge is placed on the counter's schedule like
            the begin edge: the accurate path, and the default. ``settle=False`` returns at once
            (for windows of a training step, where 0.1 s a step costs too much): the span past
            the last update is then extrapolated at the last updates' power, and
            ``Measurement.gpu_extrapolated`` says how long it is per GPU (a load that changes in
            that span is not in the figure). ``erg.compat.zeus.ZeusMonitor`` keeps Zeus's
            immediate windows.
        follow_counters: read the GPU counters in a native background thread (a few reads per
            update period) so begin edges become exact and the update schedule stays learned.

    ``begin_window(name, sync_execution=True, restart=False)`` and ``end_window(name,
    sync_execution=True, cancel=False)`` are the native methods themselves (no Python frame in
    between); ``cancel_window``, ``reset_windows``, ``gpu_indices``, ``cpu_indices`` and
    ``open_windows`` too. Windows are thread-safe; the GIL is released while counters are read
    (and taken back only to call the synchronization function).
    """

    def __init__(
        self,
        gpu_indices: Optional[Sequence[int]] = None,
        cpu_indices: Optional[Sequence[int]] = None,
        approx_instant_energy: bool = False,
        sync_execution_with: SyncWith = None,
        extrapolate_counters: bool = True,
        log_file: Optional[str] = None,
        settle: bool = True,
        follow_counters: bool = True,
    ) -> None:
        super().__init__(
            _env.inventory(),
            list(gpu_indices) if gpu_indices is not None else None,
            list(cpu_indices) if cpu_indices is not None else None,
            approx_instant_energy,
            extrapolate_counters,
            str(log_file) if log_file is not None else None,
            make_sync(sync_execution_with),
            settle,
            follow_counters,
        )

    def window(
        self,
        name: Optional[str] = None,
        sync_execution: bool = True,
        callback: Optional[Callable[[Measurement], None]] = None,
    ) -> "Window":
        """``with monitor.window("step") as w: ...`` then ``w.measurement``; or a decorator
        (``@monitor.window()``: one window per call, named after the function by default; the
        last measurement is ``fn.last_measurement`` and each goes to ``callback``)."""
        return Window(self, name, sync_execution, callback)


class Window:
    """A window as a context manager (and decorator). After the block, ``measurement`` holds the
    result and its attributes (``time``, ``total_energy``, ``gpu_energy``...) read through. If the
    block raises, the window is still ended and measured, and the exception propagates."""

    __slots__ = ("_monitor", "name", "_sync", "_callback", "measurement")

    def __init__(self, monitor: EnergyMonitor, name: Optional[str], sync: bool,
                 callback: Optional[Callable[[Measurement], None]]) -> None:
        self._monitor = monitor
        self.name = name
        self._sync = sync
        self._callback = callback
        self.measurement: Optional[Measurement] = None

    def __enter__(self) -> "Window":
        if self.name is None:
            raise ValueError("a window used with 'with' needs a name")
        self._monitor.begin_window(self.name, self._sync)
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.name is not None
        self.measurement = self._monitor.end_window(self.name, self._sync)
        if self._callback is not None:
            self._callback(self.measurement)

    def __getattr__(self, attr: str) -> Any:
        m = object.__getattribute__(self, "measurement")
        if m is None:
            raise AttributeError(f"{attr!r}: the window has not ended yet")
        return getattr(m, attr)

    def __call__(self, fn: F) -> F:
        name = self.name or fn.__qualname__
        monitor, sync, callback = self._monitor, self._sync, self._callback

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            monitor.begin_window(name, sync)
            try:
                return fn(*args, **kwargs)
            finally:
                m = monitor.end_window(name, sync)
                wrapper.last_measurement = m  # type: ignore[attr-defined]
                if callback is not None:
                    callback(m)

        wrapper.last_measurement = None  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]
