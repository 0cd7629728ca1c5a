"""Zeus's batch-size optimizer models (``zeus.optimizer.batch_size.common``): the REST API's bodies
with Zeus's fields, defaults and validation (``ValueError`` as pydantic's ValidationError is one),
and its routes. Plain classes, not pydantic: keyword construction, ``dict()``, ``json()``,
``parse_obj()`` and ``parse_raw()`` as Zeus's code uses them."""

from __future__ import annotations

import json as _json
from typing import Any, ClassVar, Dict, List, Optional, Tuple

__all__ = [
    "REGISTER_JOB_URL",
    "DELETE_JOB_URL",
    "GET_NEXT_BATCH_SIZE_URL",
    "REPORT_RESULT_URL",
    "REPORT_END_URL",
    "JobParams",
    "GpuConfig",
    "JobSpec",
    "JobSpecFromClient",
    "CreatedJob",
    "TrialId",
    "TrainingResult",
    "ReportResponse",
]

REGISTER_JOB_URL = "/jobs"
DELETE_JOB_URL = "/jobs"
GET_NEXT_BATCH_SIZE_URL = "/jobs/batch_size"
REPORT_RESULT_URL = "/report"
REPORT_END_URL = "/trials"

_REQUIRED = object()


class _Model:
    """Fields are (name, default) pairs in ``_fields`` (``_REQUIRED`` for none), inherited in order."""

    _fields: ClassVar[Tuple[Tuple[str, Any], ...]] = ()

    def __init__(self, **values: Any) -> None:
        names = [n for n, _ in self._fields]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown field(s) {', '.join(unknown)}")
        for name, default in self._fields:
            if name in values:
                value = values[name]
            elif default is _REQUIRED:
                raise ValueError(f"{type(self).__name__}: field required: {name}")
            else:
                value = list(default) if isinstance(default, list) else default
            object.__setattr__(self, name, value)
        self._validate()

    def _validate(self) -> None:
        """Checks the values (ValueError naming the field)."""

    def dict(self) -> Dict[str, Any]:
        return {n: getattr(self, n) for n, _ in self._fields}

    def json(self) -> str:
        return _json.dumps(self.dict())

    @classmethod
    def parse_obj(cls, obj: Dict[str, Any]) -> Any:
        names = {n for n, _ in cls._fields}
        return cls(**{k: v for k, v in obj.items() if k in names})  # pydantic ignores extra fields

    @classmethod
    def parse_raw(cls, text: str) -> Any:
        return cls.parse_obj(_json.loads(text))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.dict() == other.dict()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self._fields)
        return f"{type(self).__name__}({inner})"


_PARAMS = (
    ("job_id", _REQUIRED),
    ("job_id_prefix", _REQUIRED),
    ("batch_sizes", _REQUIRED),
    ("default_batch_size", _REQUIRED),
    ("eta_knob", 0.5),
    ("beta_knob", 2.0),
    ("target_metric", 0.50),
    ("higher_is_better_metric", True),
    ("max_epochs", 100),
    ("num_pruning_rounds", 2),
    ("window_size", 0),
    ("mab_prior_mean", 0.0),
    ("mab_prior_precision", 0.0),
    ("mab_num_explorations", 2),
    ("mab_seed", None),
)
_GPU = (("max_power", _REQUIRED), ("gpu_model", _REQUIRED), ("number_of_gpus", _REQUIRED))


def _check_params(m: Any) -> None:
    if not m.batch_sizes:
        raise ValueError(f"Batch Sizes = {m.batch_sizes} is empty")
    m.batch_sizes = sorted(m.batch_sizes)
    if not m.default_batch_size > 0:
        raise ValueError("default_batch_size: ensure this value is greater than 0")
    if not 0 <= m.eta_knob <= 1:
        raise ValueError("eta_knob should be in range [0,1]")
    if m.beta_knob is not None and not m.beta_knob > 0:
        raise ValueError(
            f"Invalid beta_knob({m.beta_knob}). To disable early stop, "
            "set beta_knob = None to disable or positive value."
        )
    if not m.max_epochs > 0:
        raise ValueError("max_epochs: ensure this value is greater than 0")
    if m.num_pruning_rounds < 0:
        raise ValueError("num_pruning_rounds: ensure this value is greater than or equal to 0")
    if m.mab_num_explorations < 0:
        raise ValueError("mab_num_explorations: ensure this value is greater than or equal to 0")
    if m.default_batch_size not in m.batch_sizes:
        raise ValueError(f"Default BS({m.default_batch_size}) not in batch_sizes({m.batch_sizes}).")


def _check_job_id(m: Any) -> None:
    if m.job_id is not None and not m.job_id.startswith(m.job_id_prefix):
        raise ValueError(f"Job_id({m.job_id}) does not start with prefix({m.job_id_prefix}).")


def _check_gpu(m: Any) -> None:
    if not m.max_power > 0:
        raise ValueError("max_power: ensure this value is greater than 0")
    if not m.number_of_gpus > 0:
        raise ValueError("number_of_gpus: ensure this value is greater than 0")
    if not m.gpu_model:
        raise ValueError(f"Invalid gpu_model({m.gpu_model}). Shouldn't be empty.")


class JobParams(_Model):
    """The job's id and the optimizer's parameters (Zeus's defaults)."""

    _fields = _PARAMS
    job_id: Optional[str]
    job_id_prefix: str
    batch_sizes: List[int]
    default_batch_size: int
    eta_knob: float
    beta_knob: Optional[float]
    target_metric: float
    higher_is_better_metric: bool
    max_epochs: int
    num_pruning_rounds: int
    window_size: int
    mab_prior_mean: float
    mab_prior_precision: float
    mab_num_explorations: int
    mab_seed: Optional[int]

    def _validate(self) -> None:
        _check_params(self)


class GpuConfig(_Model):
    """The job's GPUs: their maximum power limits added up (W), how many, which model."""

    _fields = _GPU
    max_power: float
    number_of_gpus: int
    gpu_model: str

    def _validate(self) -> None:
        _check_gpu(self)


class JobSpec(JobParams):
    """What the user gives: ``job_id`` may be None (the server makes one from the prefix)."""

    _fields = (("job_id", None),) + _PARAMS[1:]

    def _validate(self) -> None:
        _check_params(self)
        _check_job_id(self)


class JobSpecFromClient(JobSpec):
    """The body of POST /jobs: the JobSpec and the GPUs."""

    _fields = JobSpec._fields + _GPU
    max_power: float
    number_of_gpus: int
    gpu_model: str

    def _validate(self) -> None:
        super()._validate()
        _check_gpu(self)


class CreatedJob(JobParams):
    """The job as the server answers it (its id set)."""

    _fields = _PARAMS + _GPU
    max_power: float
    number_of_gpus: int
    gpu_model: str

    def _validate(self) -> None:
        _check_params(self)
        _check_gpu(self)


class TrialId(_Model):
    """One run of the job: the body of GET /jobs/batch_size's answer and of PATCH /trials."""

    _fields = (("job_id", _REQUIRED), ("batch_size", _REQUIRED), ("trial_number", _REQUIRED))
    job_id: str
    batch_size: int
    trial_number: int


class TrainingResult(TrialId):
    """The body of POST /report: the trial's time (s) and energy (J) so far, its metric and epoch."""

    _fields = TrialId._fields + (
        ("time", _REQUIRED),
        ("energy", _REQUIRED),
        ("metric", _REQUIRED),
        ("current_epoch", _REQUIRED),
    )
    time: float
    energy: float
    metric: float
    current_epoch: int


class ReportResponse(_Model):
    """POST /report's answer."""

    _fields = (("stop_train", _REQUIRED), ("converged", _REQUIRED), ("message", _REQUIRED))
    stop_train: bool
    converged: bool
    message: str
