"""Prometheus push metrics (``zeus.metric``): ``EnergyHistogram``, ``EnergyCumulativeCounter``,
``PowerGauge`` with Zeus's signatures, metric names, types, HELP texts, labels and buckets, over
erg's native push (erg.metric): threads instead of spawned processes.

Deliberate differences (docs/migrating-from-zeus.md, each with its test): pushes go to the group
``{job, rank (in an initialized torch.distributed group), window}`` with POST, so windows, ranks
and the three kinds no longer replace each other's series; pushes never block ``end_window`` and
a Pushgateway that fails is logged (logger ``zeus.metric``) and retried a bounded number of
times instead of raising; ``gpu_indices=None`` measures every GPU; a duplicate counter window is
an error; ``end_window`` returns at once instead of joining a process for up to 20 s.
"""

from __future__ import annotations

import abc
import logging
import warnings
from typing import List, Optional, Sequence

from erg import metric as _metric
from erg._errors import NotFoundError

from .utils.framework import sync_execution as _sync_execution

__all__ = ["Metric", "EnergyHistogram", "EnergyCumulativeCounter", "PowerGauge"]

logger = logging.getLogger("zeus.metric")

_OUT_OF_BUCKETS = "EnergyHistogram window "  # how erg's native push words an out-of-bucket energy


class WindowNotFoundError(NotFoundError, KeyError):
    """PowerGauge.end_window of a window that is not open: the KeyError Zeus's dict lookup raises,
    and erg's NotFoundError (a ValueError, as EnergyCumulativeCounter raises)."""


def _report(reports: List[str]) -> None:
    for m in reports:
        if m.startswith(_OUT_OF_BUCKETS):
            warnings.warn(m, stacklevel=3)  # Zeus warns about energies outside the buckets
        else:
            logger.warning("%s", m)


class Metric(abc.ABC):
    """Zeus's base class of the three metrics: ``begin_window`` and ``end_window``."""

    @abc.abstractmethod
    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Starts window ``name``."""

    @abc.abstractmethod
    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """Ends window ``name`` and reports its metrics."""


class _Compat(Metric):
    _push: _metric._Push
    gpu_indices: Optional[List[int]]

    def _synchronize(self, sync_execution: bool) -> None:
        if sync_execution:
            _sync_execution(list(self.gpu_indices or []))

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        self._synchronize(sync_execution)
        self._push.begin_window(name, sync_execution=False)

    def end_window(self, name: str, sync_execution: bool = True) -> None:
        self._synchronize(sync_execution)
        self._push.end_window(name, sync_execution=False)

    # erg's additions (not in Zeus): wait for the pushes, count failures, stop.
    def flush(self, timeout: float = 5.0) -> bool:
        return self._push.flush(timeout)

    @property
    def push_errors(self) -> int:
        return self._push.push_errors

    def close(self) -> None:
        self._push.close()


class EnergyHistogram(_Compat):
    """Energy of each window per device as histograms ``energy_monitor_{gpu,cpu,dram}_energy_joules``
    (labels ``window``, ``index``), pushed at each ``end_window``. ValueError for an empty bucket
    range; a warning for an energy outside the buckets."""

    def __init__(
        self,
        cpu_indices: list,
        gpu_indices: list,
        pushgateway_url: str,
        job: str,
        gpu_bucket_range: Sequence[float] = [50.0, 100.0, 200.0, 500.0, 1000.0],  # noqa: B006 (Zeus's signature)
        cpu_bucket_range: Sequence[float] = [10.0, 50.0, 100.0, 500.0, 1000.0],  # noqa: B006
        dram_bucket_range: Sequence[float] = [5.0, 10.0, 20.0, 50.0, 150.0],  # noqa: B006
    ) -> None:
        self.gpu_bucket_range = gpu_bucket_range
        self.cpu_bucket_range = cpu_bucket_range
        self.dram_bucket_range = dram_bucket_range
        self.cpu_indices = cpu_indices
        self.gpu_indices = gpu_indices
        self.pushgateway_url = pushgateway_url
        self.job = job
        self._push = _metric.EnergyHistogram(
            pushgateway_url, job, gpu_indices, cpu_indices, gpu_buckets=gpu_bucket_range,
            cpu_buckets=cpu_bucket_range, dram_buckets=dram_bucket_range)
        self._push._report = _report  # type: ignore[method-assign]


class EnergyCumulativeCounter(_Compat):
    """Energy counters ``energy_monitor_{gpu,cpu,dram}_energy_joules_total`` (labels ``window``,
    ``index``) incremented and pushed every ``update_period`` s while a window is open."""

    def __init__(self, cpu_indices: list, gpu_indices: list, update_period: int, pushgateway_url: str,
                 job: str) -> None:
        self.cpu_indices = cpu_indices
        self.gpu_indices = gpu_indices
        self.update_period = update_period
        self.pushgateway_url = pushgateway_url
        self.job = job
        self._push = _metric.EnergyCumulativeCounter(pushgateway_url, job, update_period, gpu_indices, cpu_indices)
        self._push._report = _report  # type: ignore[method-assign]

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        super().begin_window(name, sync_execution)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        super().end_window(name, sync_execution)


class PowerGauge(_Compat):
    """GPU power gauges ``power_monitor_gpu_power_watts`` (labels ``window``, ``index``) set and
    pushed every ``update_period`` s while a window is open. ValueError for a window already open."""

    def __init__(self, gpu_indices: list, update_period: int, pushgateway_url: str, job: str) -> None:
        self.gpu_indices = gpu_indices
        self.update_period = update_period
        self.pushgateway_url = pushgateway_url
        self.job = job
        self._push = _metric.PowerGauge(pushgateway_url, job, update_period, gpu_indices)
        self._push._report = _report  # type: ignore[method-assign]

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        super().begin_window(name, sync_execution)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        self._synchronize(sync_execution)
        try:
            self._push.end_window(name, sync_execution=False)
        except NotFoundError as e:
            raise WindowNotFoundError(str(e)) from None
