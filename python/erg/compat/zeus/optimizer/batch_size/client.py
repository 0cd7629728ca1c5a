"""Zeus's batch-size optimizer client (``zeus.optimizer.batch_size.client.BatchSizeOptimizer``)
over erg's (``erg.optimizers.BatchSizeOptimizer``, the native erg::bso_client): the same
constructor, callbacks, errors and end of the trial at exit. The window it measures with is
named ``"BatchSizeOptimizerClient"`` (Zeus's is misspelled ``"BatciSizeOptimizerClient"``)."""

from __future__ import annotations

from typing import Any

from erg._errors import ErgError, InvalidArgumentError
from erg.optimizers._batch_size import BatchSizeOptimizer as _ErgBatchSizeOptimizer
from erg.optimizers._batch_size import gpu_config

from ...callback import Callback
from ...utils.logging import get_logger
from .common import CreatedJob, JobSpec, JobSpecFromClient
from .exceptions import (
    ZeusBSOBadOperationError,
    ZeusBSOConfigError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)

__all__ = ["BatchSizeOptimizer"]

logger = get_logger("zeus.optimizer.batch_size.client")  # Zeus's logger name


class BatchSizeOptimizer(Callback):
    """Talks to the batch-size optimizer server: ``get_batch_size`` at the start of the script,
    ``on_train_begin`` before the first epoch, ``on_evaluate(metric)`` after each evaluation.

    Args:
        monitor: a ``ZeusMonitor`` over all and only the GPUs used for training (one model).
        server_url: the server's URL.
        job: the ``JobSpec``.
        rank: only rank 0 may ask for the batch size.
    """

    def __init__(self, monitor: Any, server_url: str, job: JobSpec, rank: int = 0) -> None:
        self.monitor = monitor
        self.server_url = server_url
        self.rank = rank
        try:
            max_power, number_of_gpus, gpu_model = gpu_config(list(monitor.gpu_indices))
        except InvalidArgumentError as e:
            raise ZeusBSOConfigError(str(e)) from None
        self.job_spec = JobSpecFromClient(
            **job.dict(), max_power=max_power, number_of_gpus=number_of_gpus, gpu_model=gpu_model
        )
        try:
            self._erg = _ErgBatchSizeOptimizer(
                monitor, server_url, job.dict(), rank=rank, gpus=(max_power, number_of_gpus, gpu_model)
            )
        except ErgError as e:
            raise ZeusBSORuntimError(str(e)) from None
        registered = self._erg.job
        self.job = CreatedJob(
            **{**job.dict(), "job_id": registered["job_id"], "batch_sizes": registered["batch_sizes"]},
            max_power=max_power,
            number_of_gpus=number_of_gpus,
            gpu_model=gpu_model,
        )
        self.current_batch_size = 0
        self.trial_number = 0
        logger.critical("Job is registered with job_id: \x1b[31;1m%s\x1b[0m", self.job.job_id)

    @property
    def cur_epoch(self) -> int:
        return self._erg.current_epoch

    @property
    def running_time(self) -> float:
        return self._erg.time

    @property
    def consumed_energy(self) -> float:
        return self._erg.energy

    @property
    def training_finished(self) -> bool:
        return self._erg.training_finished

    def get_batch_size(self) -> int:
        """This run's batch size, from the server (asked once; the trial ends at exit)."""
        if self.rank != 0:
            raise ZeusBSOBadOperationError("Only rank 0 gpu can ask for a batch size.")
        try:
            self.current_batch_size = self._erg.get_batch_size()
        except ErgError as e:
            raise ZeusBSORuntimError(str(e)) from None
        self.trial_number = self._erg.trial.trial_number
        logger.info("[BatchSizeOptimizer] Chosen batch size: %s", self.current_batch_size)
        return self.current_batch_size

    def on_train_begin(self) -> None:
        """Opens the monitor's window."""
        if self.current_batch_size == 0:
            raise ZeusBSOOperationOrderError("Call get_batch_size to set the batch size first")
        self._erg.on_train_begin()

    def on_evaluate(self, metric: float) -> None:
        """Reports the metric; raises ``ZeusBSOTrainFailError`` when the run stops unconverged."""
        if self.current_batch_size == 0:
            raise ZeusBSOOperationOrderError("Call get_batch_size to set the batch size first")
        if self.training_finished:
            return
        try:
            answer = self._erg.on_evaluate(metric)
        except ErgError as e:
            raise ZeusBSORuntimError(str(e)) from None
        if answer.stop_train and not answer.converged:
            raise ZeusBSOTrainFailError(
                f"Train failed: {answer.message} This batch size will not be selected again. "
                "Please re-launch the training"
            )
