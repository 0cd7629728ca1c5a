"""BatchSizeOptimizer: a training job's side of the batch-size optimizer server (``erg bso
serve``, or Zeus's server), over erg's native client (erg._core.bso, the C++ library's
erg::bso_client); this module adds the monitor's windows and the end of the trial at exit."""

from __future__ import annotations

import atexit
import math
import weakref
from dataclasses import MISSING, asdict, dataclass
from typing import Any, Dict, List, Optional, Tuple

from .. import _core, _env
from .._errors import InvalidArgumentError

#: The monitor window the optimizer measures a trial with.
WINDOW = "BatchSizeOptimizerClient"


@dataclass
class JobSpec:
    """A recurring training job and the optimizer's parameters, with Zeus's defaults.

    ``job_id`` must start with ``job_id_prefix``; None lets the server make one
    (``"<prefix>-<8 hex digits>"``). The server validates the rest (a refused spec raises
    ``erg.InvalidArgumentError`` naming the field).
    """

    job_id_prefix: str
    batch_sizes: List[int]
    default_batch_size: int
    job_id: Optional[str] = None
    eta_knob: float = 0.5
    beta_knob: Optional[float] = 2.0
    target_metric: float = 0.50
    higher_is_better_metric: bool = True
    max_epochs: int = 100
    num_pruning_rounds: int = 2
    window_size: int = 0
    mab_prior_mean: float = 0.0
    mab_prior_precision: float = 0.0
    mab_num_explorations: int = 2
    mab_seed: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class ReportResponse:
    """The server's answer to a report: stop now?, and did the run converge (once stopped)?"""

    stop_train: bool
    converged: bool
    message: str


@dataclass
class TrialId:
    job_id: str
    batch_size: int
    trial_number: int


def gpu_config(gpu_indices: List[int]) -> Tuple[float, int, str]:
    """(max_power W, number_of_gpus, gpu_model) of the GPUs (erg indices): their maximum power
    limits added up. ``erg.InvalidArgumentError`` for none, or for GPUs of different models."""
    inventory = _env.inventory()
    return _core.bso.gpu_config([inventory.gpus[i] for i in gpu_indices])


class BatchSizeOptimizer:
    """Asks the batch-size optimizer server which batch size this run trains with, and tells it
    after each evaluation how the run goes (Zeus's ``BatchSizeOptimizer`` callbacks).

        bso = erg.optimizers.BatchSizeOptimizer(monitor, "http://127.0.0.1:8000", job)
        batch_size = bso.get_batch_size()
        bso.on_train_begin()
        for epoch in range(job.max_epochs):
            train_one_epoch(batch_size)
            if bso.on_evaluate(validate()).stop_train:
                break

    Args:
        monitor: an ``erg.EnergyMonitor`` over all and only the job's GPUs (they must be of one
            model); its window measures the run. None: pass ``time``/``energy`` to
            ``on_evaluate`` and the GPUs as ``gpus``.
        server_url: ``http://HOST:PORT`` of the server.
        job: the ``JobSpec`` (or a dict of its fields). Registered on construction (POST /jobs).
        rank: only rank 0 asks for the batch size.
        gpus: ``(max_power W, number_of_gpus, gpu_model)``; default: from the monitor's GPUs.
        timeout_s: how long each request may take.

    A run that ends before the server said stop ends its trial (PATCH /trials: it is marked
    Failed and its batch size may be explored again): at interpreter exit, on ``close()`` /
    ``end_trial()``, or at the end of a ``with`` block. Errors are erg's (``UnavailableError``:
    no server; ``InvalidArgumentError``: a refused spec or a wrong call order;
    ``AlreadyExistsError``: the job id exists with another spec), naming the server's status
    and message.
    """

    def __init__(
        self,
        monitor: Any,
        server_url: str,
        job: Any,
        rank: int = 0,
        gpus: Optional[Tuple[float, int, str]] = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.monitor = monitor
        self.server_url = server_url
        spec = job.to_dict() if hasattr(job, "to_dict") else dict(job)
        if gpus is None:
            if monitor is None:
                raise ValueError("BatchSizeOptimizer needs a monitor or gpus=(max_power, number_of_gpus, gpu_model)")
            gpus = gpu_config(list(monitor.gpu_indices))
        max_power, number_of_gpus, gpu_model = gpus
        self._native = _core.bso.BatchSizeOptimizer(
            server_url, _with_defaults(spec), float(max_power), int(number_of_gpus), str(gpu_model), rank, timeout_s
        )
        self.rank = rank
        self._window_open = False
        self._atexit: Optional[Any] = None

    # --- Zeus's callbacks ----------------------------------------------------------------------
    def get_batch_size(self) -> int:
        """This run's batch size (the first call asks the server and starts a trial)."""
        first = self._native.trial is None
        batch_size = int(self._native.get_batch_size())
        if first:
            # Zeus ends the trial at exit; Python still runs in an atexit handler.
            ref = weakref.ref(self)
            self._atexit = lambda: (lambda o: o._end_quietly() if o is not None else None)(ref())
            atexit.register(self._atexit)
        return batch_size

    def on_train_begin(self) -> None:
        """Opens the monitor's window (before the first epoch)."""
        self._native.on_train_begin()
        if self.monitor is not None:
            self.monitor.begin_window(WINDOW)
            self._window_open = True

    def on_evaluate(
        self, metric: float, time: Optional[float] = None, energy: Optional[float] = None
    ) -> ReportResponse:
        """Reports the validation ``metric`` with the run's time and energy so far: measured by the
        monitor's window since ``on_train_begin`` (or the last report), or this stretch's
        ``time`` (s) and ``energy`` (J) when given. ``stop_train`` without ``converged``: this batch
        size failed (relaunch the job; the server picks another)."""
        if self._native.training_finished:
            return self._answer(self._native.on_evaluate(metric, 0.0, 0.0))
        if time is None or energy is None:
            if self.monitor is None:
                raise ValueError("on_evaluate needs time and energy without a monitor")
            if not self._window_open:
                raise InvalidArgumentError("call on_train_begin() before on_evaluate()")
            m = self.monitor.end_window(WINDOW)
            self._window_open = False
            energies = list(m.gpu_energy.values())
            if any(e is None or (isinstance(e, float) and math.isnan(e)) for e in energies):
                raise RuntimeError("the energy of a GPU is unknown, so the report would be wrong")
            time, energy = float(m.time), float(sum(energies))
        answer = self._answer(self._native.on_evaluate(float(metric), float(time), float(energy)))
        if not answer.stop_train and self.monitor is not None:
            self.monitor.begin_window(WINDOW)
            self._window_open = True
        return answer

    # --- the end of a run ----------------------------------------------------------------------
    def end_trial(self) -> None:
        """Ends the trial now if the server has not said stop (a no-op otherwise)."""
        if self._window_open and self.monitor is not None:
            self.monitor.end_window(WINDOW, cancel=True)
            self._window_open = False
        self._native.end_trial()
        if self._atexit is not None:
            atexit.unregister(self._atexit)
            self._atexit = None

    close = end_trial

    def _end_quietly(self) -> None:
        try:
            self._native.end_trial()
        except Exception:  # noqa: BLE001 - at exit, a server that is gone cannot be told
            pass

    def __enter__(self) -> "BatchSizeOptimizer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end_trial()

    # --- what it knows -------------------------------------------------------------------------
    @property
    def job_id(self) -> str:
        return str(self._native.job["job_id"])

    @property
    def job(self) -> Dict[str, Any]:
        """The job as registered: job_id, created (False: registered before), batch_sizes, max_power,
        number_of_gpus, gpu_model."""
        return dict(self._native.job)

    @property
    def trial(self) -> Optional[TrialId]:
        t = self._native.trial
        return TrialId(*t) if t is not None else None

    @property
    def current_epoch(self) -> int:
        return int(self._native.current_epoch)

    @property
    def time(self) -> float:
        """The trial's time so far, s."""
        return float(self._native.time)

    @property
    def energy(self) -> float:
        """The trial's energy so far, J (all GPUs)."""
        return float(self._native.energy)

    @property
    def training_finished(self) -> bool:
        return bool(self._native.training_finished)

    @staticmethod
    def _answer(t: Tuple[bool, bool, str]) -> ReportResponse:
        return ReportResponse(bool(t[0]), bool(t[1]), str(t[2]))


_DEFAULTS = {f.name: f.default for f in JobSpec.__dataclass_fields__.values() if f.default is not MISSING}


def _with_defaults(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Zeus's defaults for the fields a dict leaves out (the native side wants every one)."""
    out = dict(_DEFAULTS)
    out.update(spec)
    return out
