"""ZeusMonitor and its Measurement (``zeus.monitor.energy``) over erg's native EnergyMonitor.

Same constructor, windows, attributes (``gpus``, ``cpus``, ``soc``, ``soc_is_present``,
``measurement_states``, ``power_monitor``), errors, CSV log, log records and zero-energy warning
as Zeus 0.16. GPU energy is the plain counter difference, as Zeus computes it, read by erg's
native monitor, which also follows each counter between the edges so a counter that restarts
or steps back inside a window is seen (Zeus, reading only the edges, misses it) and a GPU whose
energy is unknown is NaN (with a logged warning), never a number. docs/migrating-from-zeus.md
lists every difference.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from time import time
from typing import Dict, List, Literal, Optional, Tuple, Union

from erg import _core, _env
from erg._errors import AlreadyExistsError, NotFoundError

from .._common import RaplNoPermissionError, check_indices
from ..device import get_cpus, get_gpus, get_soc
from ..device.cpu.common import EmptyCPUs, ZeusCPUInitError, ZeusCPUNoPermissionError
from ..device.gpu.common import EmptyGPUs, ZeusGPUInitError
from ..device.soc.common import EmptySoC, SoCMeasurement, ZeusSoCInitError
from ..utils.framework import sync_execution as sync_execution_fn
from ..utils.multiprocessing import warn_if_global_in_subprocess

__all__ = ["Measurement", "MeasurementState", "ZeusMonitor"]

logger = logging.getLogger("zeus.monitor.energy")

ZERO_ENERGY_WARNING = (
    "The energy consumption of one or more GPUs was measured as zero. This means that the time duration "
    "of the measurement window was shorter than the GPU's energy counter update period. Consider turning "
    "on the `approx_instant_energy` option in `ZeusMonitor`, which approximates the energy consumption of "
    "a short time window as instant power draw x window duration."
)
_RAPL_PERMISSION = (
    "Root privilege is required to read RAPL metrics. See https://ml.energy/zeus/getting_started/#system-privileges "
    "for more information or disable CPU measurement by passing cpu_indices=[] to ZeusMonitor"
)


@dataclass
class Measurement:
    """One window: ``time`` (s), ``gpu_energy`` (J by framework GPU index), ``cpu_energy`` and
    ``dram_energy`` (J by CPU package; None when not measured), ``soc_energy``."""

    time: float
    gpu_energy: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None
    soc_energy: Optional[SoCMeasurement] = None

    @cached_property
    def total_energy(self) -> float:
        """GPU energy only, J (as Zeus)."""
        return sum(self.gpu_energy.values())


@dataclass
class MeasurementState:
    """An open window: its start ``time`` (``time.time()``) and the counters read then (J)."""

    time: float
    gpu_energy: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None

    @cached_property
    def total_energy(self) -> float:
        return sum(self.gpu_energy.values())


class ZeusMonitor:
    """Time and energy of named windows (nested, overlapping) over GPUs and CPU packages.

    Errors raised earlier than Zeus raises them: a GPU or CPU index that does not exist is an
    IndexError (erg's InvalidArgumentError) here at construction (Zeus: a GPU one at
    construction, a CPU one at the first ``begin_window``).
    """

    def __init__(
        self,
        gpu_indices: Optional[List[int]] = None,
        cpu_indices: Optional[List[int]] = None,
        approx_instant_energy: bool = False,
        log_file: Union[str, Path, None] = None,
        sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
    ) -> None:
        warn_if_global_in_subprocess(self)
        self.approx_instant_energy = approx_instant_energy
        self.sync_with = sync_execution_with

        try:
            self.gpus = get_gpus()
        except ZeusGPUInitError:
            self.gpus = EmptyGPUs()
        try:
            self.cpus = get_cpus()
        except ZeusCPUInitError:
            self.cpus = EmptyCPUs()
        except ZeusCPUNoPermissionError as err:
            if cpu_indices:
                raise RaplNoPermissionError(_RAPL_PERMISSION) from err
            self.cpus = EmptyCPUs()
        self.soc_is_present = False
        try:
            self.soc = get_soc()
            self.soc_is_present = True
        except ZeusSoCInitError:
            self.soc = EmptySoC()

        self.gpu_indices = (
            check_indices(gpu_indices, len(self.gpus), "GPU") if gpu_indices is not None else list(range(len(self.gpus)))
        )
        self.cpu_indices = (
            check_indices(cpu_indices, len(self.cpus), "CPU") if cpu_indices is not None else list(range(len(self.cpus)))
        )
        logger.info("Monitoring GPU indices %s.", self.gpu_indices)
        logger.info("Monitoring CPU indices %s", self.cpu_indices)

        if log_file is None:
            self.log_file = None
        else:
            if parent := os.path.dirname(log_file):
                os.makedirs(parent, exist_ok=True)
            self.log_file = open(log_file, "w")  # noqa: SIM115 (kept open, a row per window)
            logger.info("Writing measurement logs to %s.", log_file)
            self.log_file.write(
                f"start_time,window_name,elapsed_time,{','.join(f'gpu{i}_energy' for i in self.gpu_indices)}\n"
            )
            self.log_file.flush()

        self.measurement_states: Dict[str, MeasurementState] = {}

        # GPUs without an energy counter (before Volta) are integrated from a PowerMonitor, as
        # Zeus does; erg's native monitor reads the counters of the others.
        old = [i for i in self.gpu_indices if not self.gpus.supports_get_total_energy_consumption(i)]
        self._counter_gpus = [i for i in self.gpu_indices if i not in old]
        # CPU index k (Zeus) is the k-th package erg found; erg names packages by RAPL zone.
        self._erg_cpu = {k: self.cpus.cpus[k]._d.index for k in self.cpu_indices}
        self._zeus_cpu = {v: k for k, v in self._erg_cpu.items()}
        self._m = _core.EnergyMonitor(
            _env.inventory(),
            self._counter_gpus,
            list(self._erg_cpu.values()),
            False,  # approx_instant_energy: computed here, the Zeus way (end_window)
            False,  # extrapolate_counters: plain counter differences, as Zeus
            None,  # log_file: written here, in Zeus's format
            None,  # sync: done here, with Zeus's timing and errors
            False,  # settle: end_window returns at once, as Zeus
            True,  # follow_counters: counter restarts and backward steps inside a window are seen
        )
        if old:
            from .power import PowerMonitor

            self.power_monitor: Optional[PowerMonitor] = PowerMonitor(gpu_indices=old, update_period=None)
        else:
            self.power_monitor = None

    def _get_instant_power(self) -> Tuple[Dict[int, float], float]:
        """Instant power of every monitored GPU (W) and how long reading them took (s)."""
        start = time()
        power = {i: self.gpus.get_instant_power_usage(i) / 1000.0 for i in self.gpu_indices}
        return power, time() - start

    def _sync(self) -> None:
        sync_execution_fn(self.gpu_indices, sync_with=self.sync_with)

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Starts window ``key``. ValueError ("Measurement window 'key' already exists") if it is
        open, unless ``restart`` (which drops the open one). ``sync_execution``: first wait for
        the GPUs' queued work (RuntimeError if the framework cannot)."""
        if key in self.measurement_states and not restart:
            raise AlreadyExistsError(f"Measurement window '{key}' already exists")
        if sync_execution and self.gpu_indices:
            self._sync()
        timestamp = time()
        self._m.begin_window(key, False, restart)
        gpus = self.gpus
        gpu_energy = {i: gpus.get_total_energy_consumption(i) / 1000.0 for i in self._counter_gpus}
        cpu_energy: Dict[int, float] = {}
        dram_energy: Dict[int, float] = {}
        for k in self.cpu_indices:
            c = self.cpus.get_total_energy_consumption(k) / 1000.0
            cpu_energy[k] = c.cpu_mj
            if c.dram_mj is not None:
                dram_energy[k] = c.dram_mj
        if self.soc_is_present:
            self.soc.begin_window(key, restart)
        self.measurement_states[key] = MeasurementState(
            time=timestamp, gpu_energy=gpu_energy, cpu_energy=cpu_energy or None, dram_energy=dram_energy or None
        )
        logger.debug("Measurement window '%s' started.", key)

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """Ends window ``key`` and returns its Measurement. ValueError ("Measurement window 'key'
        does not exist") if it is not open. ``cancel``: no measurement (zeros) and no log row."""
        try:
            state = self.measurement_states.pop(key)
        except KeyError:
            raise NotFoundError(f"Measurement window '{key}' does not exist") from None
        soc_energy = self.soc.end_window(key) if self.soc_is_present else None
        power, power_measurement_time = self._get_instant_power() if self.approx_instant_energy else ({}, 0.0)
        if sync_execution and self.gpu_indices:
            self._sync()

        if cancel:
            self._m.cancel_window(key)
            logger.debug("Measurement window '%s' cancelled.", key)
            if soc_energy is not None:
                soc_energy.zero_all_fields()
            return Measurement(
                time=0.0,
                gpu_energy={gpu: 0.0 for gpu in self.gpu_indices},
                cpu_energy={cpu: 0.0 for cpu in self.cpu_indices},
                soc_energy=soc_energy,
            )

        end_time = time()
        m = self._m.end_window(key, False)
        time_consumption: float = m.time
        native = m.gpu_energy
        gpu_energy: Dict[int, float] = {}
        for gpu in self.gpu_indices:
            e = native.get(gpu)  # None: unknown, or not counter-based (set below)
            gpu_energy[gpu] = math.nan if e is None else e
        # A GPU whose energy erg could not measure (lost, unreadable at an edge) is NaN, never a number.
        for device, message in m.errors.items():
            if device.startswith("gpu") and native.get(int(device[3:])) is None:
                logger.warning("Energy of %s is unknown (NaN): %s", device, message)
        if self.power_monitor is not None:
            energy = self.power_monitor.get_energy(state.time, end_time)
            for gpu in self.power_monitor.gpu_indices:
                e = None if energy is None else energy.get(gpu)
                if e is None:
                    logger.warning("Energy of gpu%d is unknown (NaN): no power sample in the window", gpu)
                gpu_energy[gpu] = math.nan if e is None else e

        if self.approx_instant_energy:
            for gpu in self.gpu_indices:
                if gpu_energy[gpu] == 0.0:
                    gpu_energy[gpu] = power[gpu] * (time_consumption - power_measurement_time)
        if not self.approx_instant_energy and any(e == 0.0 for e in gpu_energy.values()):
            warnings.warn(ZERO_ENERGY_WARNING, stacklevel=1)
        logger.debug("Measurement window '%s' ended.", key)

        if self.log_file is not None:
            self.log_file.write(
                f"{m.start_wall},{key},{time_consumption},"
                + ",".join(str(gpu_energy[gpu]) for gpu in self.gpu_indices)
                + "\n"
            )
            self.log_file.flush()

        zeus_cpu = self._zeus_cpu
        return Measurement(
            time=time_consumption,
            gpu_energy=gpu_energy,
            cpu_energy={zeus_cpu[c]: e for c, e in m.cpu_energy.items()} or None,
            dram_energy={zeus_cpu[c]: e for c, e in m.dram_energy.items()} or None,
            soc_energy=soc_energy,
        )

    def reset_windows(self) -> None:
        """Cancels every open window (no measurement, no log row)."""
        keys = list(self.measurement_states)
        self.measurement_states.clear()
        self._m.reset_windows()
        if self.soc_is_present:
            for key in keys:
                self.soc.end_window(key)
        if keys:
            logger.info("Reset measurement windows %s.", keys)
