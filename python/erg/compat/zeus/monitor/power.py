"""PowerMonitor (``zeus.monitor.power``) over erg's native sampler: one thread, no processes.

Zeus's names, signatures, attributes (``gpu_indices``, ``update_period``,
``measurement_domains``, ``gpus``), return types, units, errors and log records. Timestamps
are ``time.time()`` seconds, as Zeus's. Deliberate differences (docs/migrating-from-zeus.md):
energy integrates the samples with hold-last, so a window of constant power is not 0 J; a GPU
index that does not exist is an IndexError at construction; ``get_energy`` never counts time
not lived yet, nor time after ``stop()``.
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass
from typing import Dict, List, Literal, Optional, Tuple, Union

from erg import _core, _env
from erg._errors import ErgError, InvalidArgumentError, UnavailableError

from .._common import check_indices, native_span as _native_span, wall_offset, within as _within
from ..device import get_gpus
from ..utils.multiprocessing import warn_if_global_in_subprocess

__all__ = ["infer_counter_update_period", "PowerDomain", "PowerSample", "PowerMonitor"]

logger = logging.getLogger("zeus.monitor.power")

_INFER_BUDGET_S = 0.6  # polling budget per GPU model: a few updates of a ~100 ms sensor


def _infer_counter_update_period_single(gpu_index: int) -> float:
    """How often GPU ``gpu_index``'s power reading changes, s (instant power, else average;
    0.1 if it never changed, 0.2 if neither can be read)."""
    device = _env.inventory().gpus[gpu_index]
    domains = device.power_domains
    if "device_instant" not in domains:
        if "device_average" not in domains:
            logger.warning(
                "Neither instant nor average power available for GPU %d. "
                "Using conservative default update period of 0.1s",
                gpu_index,
            )
            return 0.2  # halved to 0.1 s
        logger.info(
            "Instant power not available for GPU %d, using average power for counter period inference", gpu_index
        )
    period = _core.infer_update_period(device, _INFER_BUDGET_S)
    return 0.1 if period is None else period


def infer_counter_update_period(gpu_indices: List[int]) -> float:
    """Half the shortest power-counter update period among the GPU models of ``gpu_indices``,
    s (polling twice per update sees every change); at most 0.1 s."""
    gpus = get_gpus()
    update_period = math.inf
    covered = set()
    for index in gpu_indices:
        model = gpus.get_name(index)
        if model in covered:
            continue
        logger.info("Detected %s, inferring GPU power counter update period.", model)
        covered.add(model)
        detected = _infer_counter_update_period_single(index)
        logger.info("Counter update period for %s is %.2f s", model, detected)
        update_period = min(update_period, detected)
    update_period /= 2.0
    if update_period > 0.1:
        logger.warning("Inferred update period (%.2f s) is too long. Using 0.1 s instead.", update_period)
        update_period = 0.1
    return update_period


class PowerDomain(enum.Enum):
    """GPU power readings: instant board power, board and memory power averaged by the driver."""

    DEVICE_INSTANT = "device_instant"
    DEVICE_AVERAGE = "device_average"
    MEMORY_AVERAGE = "memory_average"


@dataclass
class PowerSample:
    """One power reading (``timestamp`` from ``time.time()``, ``power_mw`` in mW)."""

    timestamp: float
    gpu_index: int
    power_mw: float


_DomainArg = Union[PowerDomain, Literal["device_instant", "device_average", "memory_average"]]


class PowerMonitor:
    """Samples GPU power in the background, in every requested domain, every ``update_period``
    seconds (None: inferred from the GPUs, see ``infer_counter_update_period``).

    Errors: ValueError for ``gpu_indices=[]`` or ``power_domains=[]``, or a domain the GPUs do
    not support; IndexError (erg's InvalidArgumentError) for a GPU index that does not exist.
    """

    def __init__(
        self,
        gpu_indices: Optional[List[int]] = None,
        update_period: Optional[float] = None,
        max_samples_per_gpu: Optional[int] = None,
        power_domains: Optional[List[_DomainArg]] = None,
    ) -> None:
        warn_if_global_in_subprocess(self)
        if gpu_indices is not None and not gpu_indices:
            raise InvalidArgumentError("`gpu_indices` must be either `None` or non-empty")
        if power_domains is not None and not power_domains:
            raise InvalidArgumentError("`power_domains` must be either `None` or non-empty")
        self.gpus = get_gpus()
        self.gpu_indices: List[int] = (
            check_indices(gpu_indices, len(self.gpus), "GPU") if gpu_indices is not None else list(range(len(self.gpus)))
        )
        logger.info("Monitoring power usage of GPUs %s", self.gpu_indices)

        if update_period is None:
            update_period = infer_counter_update_period(self.gpu_indices)
        elif update_period < 0.05:
            logger.warning(
                "An update period of %g might be too fast, which may lead to unexpected errors (e.g., NotSupported) "
                "and/or zero values being returned. If you see these, consider increasing to >= 0.05.",
                update_period,
            )
        self.update_period = update_period
        self.max_samples_per_gpu = max_samples_per_gpu

        supported = self._determine_supported_domains()
        logger.info("Supported power domains: %s", [d.value for d in supported])
        if power_domains is None:
            domains = supported
        else:
            domains = []
            for requested in power_domains:
                domain = PowerDomain(requested)
                if domain not in supported:
                    raise InvalidArgumentError(
                        f"Requested power domain {domain.value} is not supported. "
                        f"Supported domains are: {[d.value for d in supported]}."
                    )
                if domain not in domains:
                    domains.append(domain)
        self.measurement_domains: List[PowerDomain] = domains
        if PowerDomain.DEVICE_INSTANT not in domains:
            logger.warning(
                "PowerDomain.DEVICE_INSTANT is not being monitored. "
                "Pass a monitored domain to the `power_domain` parameter of `get_power`."
            )

        self._p = _core.PowerMonitor(
            _env.inventory(), self.gpu_indices, [d.value for d in domains], False, float(update_period),
            max_samples_per_gpu or 0,
        )
        self._offset = wall_offset()  # time.time() = monitor clock + offset
        self._stopped_at: Optional[float] = None

    def _determine_supported_domains(self) -> List[PowerDomain]:
        """The domains some monitored GPU can read (Zeus probes GPU 0 only)."""
        gpus = _env.inventory().gpus
        have = {d for i in self.gpu_indices for d in gpus[i].power_domains}
        return [d for d in PowerDomain if d.value in have]

    def stop(self) -> None:
        """Stops sampling (idempotent). What was sampled stays queryable."""
        if self._stopped_at is None:
            self._p.stop()
            self._stopped_at = _core.monotonic()

    def _check(self, power_domain: _DomainArg, hint: str = "") -> PowerDomain:
        domain = PowerDomain(power_domain)
        if domain not in self.measurement_domains:
            raise InvalidArgumentError(
                f"Power domain {domain.value} is not being monitored. "
                f"Monitored domains: {[d.value for d in self.measurement_domains]}{hint}"
            )
        return domain

    def get_power_timeline(
        self,
        power_domain: _DomainArg,
        gpu_index: Optional[int] = None,
        start_time: Optional[float] = None,
        end_time: Optional[float] = None,
    ) -> Dict[int, List[Tuple[float, float]]]:
        """``{gpu: [(time.time() timestamp, W), ...]}`` of the samples with start <= t <= end,
        in time order (equal consecutive readings are stored once)."""
        domain = self._check(power_domain)
        start, end = _native_span(start_time, end_time, self._offset)
        result: Dict[int, List[Tuple[float, float]]] = {}
        for gpu in [gpu_index] if gpu_index is not None else self.gpu_indices:
            if gpu not in self.gpu_indices or not self._p.sampled(gpu, domain.value):
                continue
            t, w = self._p.gpu_timeline(gpu, domain.value, start, end)
            result[gpu] = _within(zip((t + self._offset).tolist(), w.tolist()), start_time, end_time)
        return result

    def get_all_power_timelines(
        self, gpu_index: Optional[int] = None, start_time: Optional[float] = None, end_time: Optional[float] = None
    ) -> Dict[str, Dict[int, List[Tuple[float, float]]]]:
        """``{domain value: get_power_timeline(domain, ...)}`` for every monitored domain."""
        return {d.value: self.get_power_timeline(d, gpu_index, start_time, end_time) for d in self.measurement_domains}

    def get_energy(
        self, start_time: float, end_time: float, power_domain: Optional[_DomainArg] = None
    ) -> Optional[Dict[int, float]]:
        """Energy (J) per GPU from ``start_time`` to ``end_time`` (``time.time()`` seconds),
        integrating the samples (the power between two samples is the earlier one's). The span
        is cut at now and at ``stop()``: no energy for time not lived or not sampled. Default
        domain: instant, else average (ValueError if neither is monitored). None before the
        first sample."""
        if power_domain is None:
            if PowerDomain.DEVICE_INSTANT in self.measurement_domains:
                power_domain = PowerDomain.DEVICE_INSTANT
            elif PowerDomain.DEVICE_AVERAGE in self.measurement_domains:
                power_domain = PowerDomain.DEVICE_AVERAGE
            else:
                raise InvalidArgumentError(
                    "Neither PowerDomain.DEVICE_INSTANT nor PowerDomain.DEVICE_AVERAGE is being monitored. "
                    "Cannot compute energy usage."
                )
        domain = self._check(power_domain).value
        lived = _core.monotonic() if self._stopped_at is None else self._stopped_at
        a = start_time - self._offset
        b = min(end_time - self._offset, lived)
        out: Dict[int, float] = {}
        for gpu in self.gpu_indices:
            if not self._p.sampled(gpu, domain):
                continue
            if b <= a:
                out[gpu] = 0.0
                continue
            try:
                out[gpu] = self._p.gpu_energy(gpu, domain, a, b)
            except UnavailableError:
                return None  # no sample yet
            except InvalidArgumentError:
                # The span starts before the first sample: from the first sample inside it.
                t, _ = self._p.gpu_timeline(gpu, domain, a, b)
                out[gpu] = self._p.gpu_energy(gpu, domain, float(t[0]), b) if len(t) else 0.0
            except ErgError as e:  # the GPU stopped being sampled (lost) inside the span
                logger.warning("Energy of GPU %d is unknown (NaN): %s", gpu, e)
                out[gpu] = math.nan
        return out or None

    def get_power(
        self, time: Optional[float] = None, power_domain: _DomainArg = PowerDomain.DEVICE_INSTANT
    ) -> Optional[Dict[int, float]]:
        """``{gpu: W}``: the latest sample, or the one nearest to ``time`` (``time.time()``
        seconds; a tie goes to the earlier). None if some GPU has no sample."""
        domain = self._check(power_domain, ". Pass one of the monitored domains to the `power_domain` parameter.")
        t = None if time is None else time - self._offset
        out: Dict[int, float] = {}
        for gpu in self.gpu_indices:
            try:
                out[gpu] = self._p.gpu_power(gpu, domain.value, t)
            except ErgError:
                return None
        return out
