"""Pushing energy and power to a Prometheus Pushgateway: ``EnergyHistogram``,
``EnergyCumulativeCounter``, ``PowerGauge`` (Zeus's ``zeus.metric``, over erg's native push).

    from erg.metric import EnergyHistogram
    hist = EnergyHistogram("http://pushgateway:9091", job="train")
    hist.begin_window("step")
    train_step()
    hist.end_window("step")        # observes each device's energy; the push runs in the background

Series carry Zeus's names (``energy_monitor_{gpu,cpu,dram}_energy_joules``,
``power_monitor_gpu_power_watts``), types, HELP texts and ``window``/``index`` labels. Every push
goes to the Pushgateway group ``{job, rank (when distributed), window}`` so that windows, ranks and
the three kinds never replace each other's series. Pushes run on a native thread: ``end_window``
never waits for the network; an unreachable or slow gateway is retried a bounded number of times,
then logged (logger ``erg.metric``) and dropped, and never stops or slows the program. See
docs/prometheus.md.

The rank: ``rank="auto"`` (the default) adds ``rank=<torch.distributed rank>`` to the group when
this process is in an initialized ``torch.distributed`` process group (torch is never imported
for it); an int or str sets it; None leaves it out.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from . import _core, _env
from ._sync import SyncWith, make_sync

logger = logging.getLogger("erg.metric")

DEFAULT_GPU_BUCKETS: List[float] = list(_core.prometheus.DEFAULT_GPU_BUCKETS)
DEFAULT_CPU_BUCKETS: List[float] = list(_core.prometheus.DEFAULT_CPU_BUCKETS)
DEFAULT_DRAM_BUCKETS: List[float] = list(_core.prometheus.DEFAULT_DRAM_BUCKETS)

Rank = Union[int, str, None]

__all__ = [
    "EnergyHistogram", "EnergyCumulativeCounter", "PowerGauge", "distributed_rank",
    "DEFAULT_GPU_BUCKETS", "DEFAULT_CPU_BUCKETS", "DEFAULT_DRAM_BUCKETS",
]


def distributed_rank() -> Optional[int]:
    """This process's rank in an initialized ``torch.distributed`` process group, else None.
    Looks only at an already imported torch (a program that uses ranks has imported it)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # a torch without distributed support, or a half-torn-down group
        return None
    return None


def _grouping(rank: Rank, grouping: Optional[Dict[str, str]]) -> Dict[str, str]:
    out = {str(k): str(v) for k, v in (grouping or {}).items()}
    if rank == "auto":
        r = distributed_rank()
        if r is not None:
            out.setdefault("rank", str(r))
    elif rank is not None:
        out["rank"] = str(rank)
    return out


def _log_reports(reports: List[str]) -> None:
    for m in reports:
        logger.warning("%s", m)


class _Push:
    """What the three classes share: the native object, synchronization, reports to the log."""

    _native: Any
    _sync: Optional[Callable[[Sequence[int]], None]]
    _gpu_indices: List[int]
    _report: Callable[[List[str]], None] = staticmethod(_log_reports)

    def _drain(self) -> None:
        reports = self._native.take_messages()
        if reports:
            self._report(reports)

    def _synchronize(self, sync_execution: bool) -> None:
        if sync_execution and self._sync is not None:
            self._sync(self._gpu_indices)

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Starts window ``name``. AlreadyExistsError (a ValueError) if it is open."""
        self._synchronize(sync_execution)
        try:
            self._native.begin_window(name)
        finally:
            self._drain()

    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """Ends window ``name`` and queues its push; returns without waiting for the network.
        NotFoundError (a ValueError) if it is not open."""
        self._synchronize(sync_execution)
        try:
            self._native.end_window(name)
        finally:
            self._drain()

    def flush(self, timeout: float = 5.0) -> bool:
        """Waits until every queued push is sent or dropped, at most ``timeout`` s. True if none is left."""
        try:
            return bool(self._native.flush(timeout))
        finally:
            self._drain()

    @property
    def push_errors(self) -> int:
        """Failed push attempts so far (each is logged)."""
        return int(self._native.push_errors)

    def close(self) -> None:
        """Stops open windows' updaters and waits for the last pushes (at most ``close_timeout``).
        Also done when the object is garbage-collected."""
        self._native.close()
        self._drain()

    def __enter__(self) -> "_Push":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _gpu_list(indices: Optional[Sequence[int]]) -> List[int]:
    if indices is not None:
        return list(indices)
    return [g.index for g in _env.inventory().gpus]


class EnergyHistogram(_Push):
    """Per-window energy histograms: ``end_window`` observes each device's energy of the window
    (J) and pushes. Energies outside the buckets are logged (Zeus warns).

    Args:
        gateway_url: ``http://host:port`` or ``host:port`` of the Pushgateway (https is not supported).
        job: the ``job`` grouping label.
        gpu_indices, cpu_indices: devices to measure; None: all.
        gpu_buckets, cpu_buckets, dram_buckets: upper bounds, J (Zeus's defaults); an empty list
            is an InvalidArgumentError (a ValueError).
        rank: see the module's docs. grouping: further grouping labels.
        timeout: bound on one HTTP exchange, s. max_attempts, retry_backoff: retries of one push.
        close_timeout: how long ``close`` waits for pushes still queued, s.
        sync_execution_with: as EnergyMonitor's ("torch", "jax", "cupy", a callable or None).
    """

    def __init__(
        self,
        gateway_url: str,
        job: str,
        gpu_indices: Optional[Sequence[int]] = None,
        cpu_indices: Optional[Sequence[int]] = None,
        *,
        gpu_buckets: Sequence[float] = DEFAULT_GPU_BUCKETS,
        cpu_buckets: Sequence[float] = DEFAULT_CPU_BUCKETS,
        dram_buckets: Sequence[float] = DEFAULT_DRAM_BUCKETS,
        rank: Rank = "auto",
        grouping: Optional[Dict[str, str]] = None,
        timeout: float = 2.0,
        max_attempts: int = 3,
        retry_backoff: float = 0.25,
        close_timeout: float = 5.0,
        sync_execution_with: SyncWith = None,
    ) -> None:
        self._gpu_indices = _gpu_list(gpu_indices)
        self._sync = make_sync(sync_execution_with)
        self._native = _core.prometheus.EnergyHistogram(
            _env.inventory(), self._gpu_indices, list(cpu_indices) if cpu_indices is not None else None,
            gateway_url, job, _grouping(rank, grouping), [float(b) for b in gpu_buckets],
            [float(b) for b in cpu_buckets], [float(b) for b in dram_buckets], timeout, max_attempts,
            retry_backoff, close_timeout)


class EnergyCumulativeCounter(_Push):
    """Energy counters (``*_joules_total``) that grow while a window is open: every
    ``update_period`` s a native thread adds each device's energy since the last update and
    pushes; ``end_window`` adds the rest at once and queues the final push. Windows may overlap.
    Arguments as EnergyHistogram's."""

    def __init__(
        self,
        gateway_url: str,
        job: str,
        update_period: float,
        gpu_indices: Optional[Sequence[int]] = None,
        cpu_indices: Optional[Sequence[int]] = None,
        *,
        rank: Rank = "auto",
        grouping: Optional[Dict[str, str]] = None,
        timeout: float = 2.0,
        max_attempts: int = 3,
        retry_backoff: float = 0.25,
        close_timeout: float = 5.0,
        sync_execution_with: SyncWith = None,
    ) -> None:
        self._gpu_indices = _gpu_list(gpu_indices)
        self._sync = make_sync(sync_execution_with)
        self._native = _core.prometheus.EnergyCumulativeCounter(
            _env.inventory(), self._gpu_indices, list(cpu_indices) if cpu_indices is not None else None,
            float(update_period), gateway_url, job, _grouping(rank, grouping), timeout, max_attempts,
            retry_backoff, close_timeout)


class PowerGauge(_Push):
    """GPU power gauges: while a window is open, every ``update_period`` s each GPU's latest
    power (W) is set and pushed. Arguments as EnergyHistogram's."""

    def __init__(
        self,
        gateway_url: str,
        job: str,
        update_period: float,
        gpu_indices: Optional[Sequence[int]] = None,
        *,
        rank: Rank = "auto",
        grouping: Optional[Dict[str, str]] = None,
        timeout: float = 2.0,
        max_attempts: int = 3,
        retry_backoff: float = 0.25,
        close_timeout: float = 5.0,
        sync_execution_with: SyncWith = None,
    ) -> None:
        self._gpu_indices = _gpu_list(gpu_indices)
        self._sync = make_sync(sync_execution_with)
        self._native = _core.prometheus.PowerGauge(
            _env.inventory(), self._gpu_indices, float(update_period), gateway_url, job,
            _grouping(rank, grouping), timeout, max_attempts, retry_backoff, close_timeout)
