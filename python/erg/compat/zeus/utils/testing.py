"""``ReplayZeusMonitor`` (``zeus.utils.testing``): a ZeusMonitor that replays a ZeusMonitor CSV
log instead of measuring, to test training code fast."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Union

from ..monitor.energy import Measurement, ZeusMonitor
from .framework import sync_execution as sync_execution_fn
from .logging import get_logger

__all__ = ["ReplayZeusMonitor"]


class ReplayZeusMonitor(ZeusMonitor):
    """Each ``end_window`` returns the next row of ``log_file`` (written by a ZeusMonitor with
    ``log_file``), checking the window name unless ``match_window_name`` is False. GPU indices
    come from the log's header unless given. RuntimeError for a window already open or not
    open, a name that does not match, or no more rows."""

    def __init__(
        self,
        gpu_indices: Optional[List[int]] = None,
        approx_instant_energy: bool = False,
        log_file: Union[str, Path, None] = None,
        ignore_sync_execution: bool = False,
        match_window_name: bool = True,
    ) -> None:
        if log_file is None:
            raise ValueError("`log_file` cannot be `None` for `ReplayZeusMonitor`.")
        self.approx_instant_energy = approx_instant_energy
        self.log_file = open(log_file)  # noqa: SIM115 (read row by row)
        self.ignore_sync_execution = ignore_sync_execution
        self.match_window_name = match_window_name
        header = self.log_file.readline()
        if gpu_indices is None:
            gpu_indices = [int(col.split("_")[0][3:]) for col in header.strip().split(",")[3:] if col]
        self.nvml_gpu_indices = self.gpu_indices = gpu_indices
        self.cpu_indices = []
        self.logger = get_logger(type(self).__name__)
        self.logger.info("Replaying from '%s' with GPU indices %s", log_file, gpu_indices)
        self.ongoing_windows: List[str] = []

    def begin_window(self, key: str, sync_execution: bool = True) -> None:  # type: ignore[override]
        if key in self.ongoing_windows:
            raise RuntimeError(f"Window {key} is already ongoing.")
        self.ongoing_windows.append(key)
        if not self.ignore_sync_execution and sync_execution:
            sync_execution_fn(self.gpu_indices)
        self.logger.info("Measurement window '%s' started.", key)

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        try:
            self.ongoing_windows.remove(key)
        except ValueError:
            raise RuntimeError(f"Window {key} is not ongoing.") from None
        if not self.ignore_sync_execution and sync_execution:
            sync_execution_fn(self.gpu_indices)
        if cancel:
            self.logger.info("Measurement window '%s' cancelled.", key)
            return Measurement(time=0.0, gpu_energy={gpu: 0.0 for gpu in self.gpu_indices})
        line = self.log_file.readline()
        if not line:
            raise RuntimeError("No more lines in the log file.")
        _, window_name, *nums = line.strip().split(",")
        if self.match_window_name and window_name != key:
            raise RuntimeError(f"Was expecting {window_name}, not {key}.")
        if len(nums) != len(self.gpu_indices) + 1:
            raise RuntimeError(f"Line has unexpected number of energy measurements: {line}")
        elapsed, *energies = map(float, nums)
        measurement = Measurement(time=elapsed, gpu_energy=dict(zip(self.gpu_indices, energies)))
        self.logger.info("Measurement window '%s' ended (%s).", key, measurement)
        return measurement
