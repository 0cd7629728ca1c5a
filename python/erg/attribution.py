"""Energy per process and per inference request, each figure with a bound (issue 23).

    import erg.attribution as attr

    # Processes sharing a GPU, from the driver's per-process utilization samples:
    meter = attr.ProcessMeter(gpu=0, idle_power=55.0, idle_error=2.0)
    meter.begin(); ...; meter.poll(); ...; meter.end()
    a = meter.attribute()            # {"processes": {pid: {"energy", "bound", ...}}, "idle", ...}

    # Requests of an inference server on one GPU:
    meter = attr.RequestMeter(gpu=0)
    with meter.request("req-1") as r:
        ...                          # serve it
        r.tokens = 128
    a = meter.attribute()            # a["requests"]["req-1"]["joules_per_token"], ["bound"]

    # What ergd measured for this user's processes (others' folded into "other_users"):
    attr.from_daemon()               # ERG_DAEMON_SOCK or /run/ergd/ergd.sock

docs/attribution.md states the models and the bounds.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import _core, _env

_native = _core.attribution

#: (start s, end s, energy J, error J) — a counter period measured while the GPU ran nothing.
IdleSegment = Tuple[float, float, float, float]


def _gpu(gpu: Any) -> Any:
    """A GPU of this process's inventory by index, or a Gpu object as is."""
    if isinstance(gpu, int):
        gpus = _env.inventory().gpus
        if not 0 <= gpu < len(gpus):
            from ._errors import NotFoundError

            raise NotFoundError(f"no GPU with index {gpu} ({len(gpus)} GPUs)")
        return gpus[gpu]
    return gpu


def attribute_processes(start: float, end: float, energy: float, energy_error: float,
                        samples: Iterable[Tuple[int, float, int]], idle_power: float = 0.0,
                        idle_error: float = 0.0, sample_period: Optional[float] = None,
                        edge_uncertainty: float = 0.0, model_error: float = 0.05) -> Dict[str, Any]:
    """Splits ``energy`` (J, ± ``energy_error``) measured over [start, end] (s since the epoch)
    among processes by their samples ``(pid, timestamp s, sm %)``: idle (idle_power × time), each
    process by its GPU-busy time, the rest unattributed; every figure with its bound."""
    return _native.attribute_processes(start, end, energy, energy_error, list(samples), idle_power, idle_error,
                                       sample_period, edge_uncertainty, model_error)


def calibrate_idle(segments: Sequence[IdleSegment]) -> Tuple[float, float]:
    """(idle power W, its error W) from counter periods measured while the GPU ran nothing."""
    return _native.calibrate_idle(list(segments))


class ProcessMeter:
    """Splits one GPU's energy between ``begin()`` and ``end()`` among the processes on it.

    Call ``poll()`` every few seconds in between (the driver keeps a bounded buffer of samples),
    and ``attribute()`` about a sample period (≤ 1 s) after ``end()``. On a MIG GPU the result has
    ``attributable = False`` and a ``reason`` — never 0 J per process.

    Args:
        gpu: index in this process's inventory (``erg.gpus()``) or a ``Gpu``.
        idle_power, idle_error: the GPU's idle model in W (``calibrate_idle``); 0 counts idle energy as active.
        edge_uncertainty: s; None = the counter's update period (a reading's time may be the read's, not
            the update's); 0 where the driver stamps readings with the update time.
        model_error: the stated error of "equal energy per unit of SM activity" (5 %).
    """

    def __init__(self, gpu: Any = 0, idle_power: float = 0.0, idle_error: float = 0.0,
                 sample_period: Optional[float] = None, edge_uncertainty: Optional[float] = None,
                 model_error: float = 0.05) -> None:
        self._m = _native.ProcessMeter(_gpu(gpu), idle_power, idle_error, sample_period, edge_uncertainty,
                                       model_error)

    def begin(self) -> None:
        self._m.begin()

    def poll(self) -> None:
        self._m.poll()

    def end(self, energy_error: float = 0.03) -> None:
        self._m.end(energy_error)

    def attribute(self) -> Dict[str, Any]:
        """``{"measured", "idle", "unattributed", "processes": {pid: {"energy", "bound", "busy",
        "share", "samples"}}, ...}`` (J, s); idle + Σ processes + unattributed = measured."""
        return self._m.attribute()


class _Request:
    """What a request reports while it runs: set ``tokens`` before the block ends."""

    def __init__(self, meter: "RequestMeter", request_id: str) -> None:
        self.id = request_id
        self.tokens = 0.0
        self._meter = meter

    def __enter__(self) -> "_Request":
        self._meter.begin(self.id)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._meter.end(self.id, self.tokens)


class RequestMeter:
    """Energy per request on one GPU, for an inference server.

    ``with meter.request(id) as r: ...; r.tokens = n`` marks the request's time in the batch
    (or ``begin(id)`` / ``end(id, tokens)``); the GPU's counter is read at every start and end.
    ``attribute()`` splits the energy between those readings among the finished requests by
    ``rule`` (``"time_in_batch"``: equal shares of every instant; ``"token_share"``: by token
    rate) and gives each request J, J/token and their bounds. Thread-safe.

    Args:
        gpu: index in this process's inventory or a ``Gpu``.
        power_swing: W, how far the GPU's power may move inside a segment (between two readings).
            None = from a native power timeline (``power_timeline``): max − min of the GPU's
            instant power over the segment + 10 % + 5 W, at most the power limit; without one,
            the power limit (safe, loose).
        idle_power: W; with it, ``attribute_idle=False`` charges requests only the energy above idle.
        energy_error: the counter's gain error as a share of each figure (3 %).
        unseen_share: the share of each counter period the power sensor does not sample; the
            counter may miss up to ``power_swing`` over it. None = 0.75 on A100/H100 (they sample
            about 25 ms of every 100 ms, Yang et al. 2024), else 0.
    """

    def __init__(self, gpu: Any = 0, power_swing: Optional[float] = None, rule: str = "time_in_batch",
                 idle_power: Optional[float] = None, attribute_idle: bool = True,
                 energy_error: float = 0.03, unseen_share: Optional[float] = None,
                 power_timeline: bool = True) -> None:
        self._m = _native.GpuRequestMeter(_gpu(gpu), power_swing, rule, idle_power, attribute_idle, energy_error,
                                          unseen_share, power_timeline)

    def request(self, request_id: str) -> _Request:
        return _Request(self, request_id)

    def begin(self, request_id: str) -> None:
        self._m.begin(request_id)

    def end(self, request_id: str, tokens: float = 0.0) -> None:
        self._m.end(request_id, tokens)

    @property
    def in_flight(self) -> int:
        return self._m.in_flight

    def attribute(self, wait: float = 1.0) -> Dict[str, Any]:
        """Waits (≤ ``wait`` s) for a counter update past the last request's end, then splits:
        ``{"measured", "unattributed", "requests": {id: {"energy", "bound", "idle", "in_flight",
        "joules_per_token", "joules_per_token_bound"}}}``."""
        return self._m.attribute(wait)


def from_daemon(socket: Optional[str] = None, gpu_ids: Optional[Sequence[int]] = None,
                since_ms: Optional[int] = None) -> Dict[str, Any]:
    """ergd's ``GET /attribution``: per GPU the window, the measured energy, idle, unattributed,
    this caller's processes (pid, uid, comm, container, pod, energy, bound, power) and the other
    users' processes summed in ``other_users`` (all of them for root and the uids/gids ergd's
    ``--attribution-all-uids/--attribution-all-gids`` name). ``socket``: ERG_DAEMON_SOCK, else
    /run/ergd/ergd.sock. ``since_ms``: window start (ms since the epoch); None = since ergd started."""
    path = socket or os.environ.get("ERG_DAEMON_SOCK") or "/run/ergd/ergd.sock"
    return _native.from_daemon(path, list(gpu_ids or []), since_ms)


__all__: List[str] = ["ProcessMeter", "RequestMeter", "attribute_processes", "calibrate_idle", "from_daemon"]
