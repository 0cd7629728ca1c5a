"""Optimizers: the GPU power-limit optimizer (Zeus's GlobalPowerLimitOptimizer), the client of the
batch-size optimizer server (Zeus's BatchSizeOptimizer; ``erg bso serve``), the rank side of Perseus
(Zeus's PipelineFrequencyOptimizer; ``erg perseus serve``) and the helpers a
command run under ``erg optimize power-limit`` uses to report its steps.

    monitor = erg.EnergyMonitor(gpu_indices=[local_rank])
    plo = erg.optimizers.PowerLimitOptimizer(monitor)      # ZeusCost(eta=0.5) by default
    for epoch in range(epochs):
        for batch in loader:
            plo.on_step_begin()
            train_step(batch)
        plo.on_epoch_end()

The state machine is erg's native one (``erg._core.power_limit``, the same code the C++ library
and the CLI run); this package adapts the monitor, the selectors and torch.distributed to it.
"""

from ._batch_size import BatchSizeOptimizer, JobSpec, ReportResponse, TrialId
from ._pipeline_frequency import PipelineFrequencyOptimizer
from ._power_limit import (
    Done,
    Energy,
    MaxSlowdownConstraint,
    OptimumSelector,
    PowerLimitMeasurement,
    PowerLimitOptimizer,
    Profiling,
    Ready,
    Time,
    Warmup,
    ZeusCost,
)
from ._report import report_epoch, report_step

__all__ = [
    "PowerLimitOptimizer",
    "BatchSizeOptimizer",
    "PipelineFrequencyOptimizer",
    "JobSpec",
    "ReportResponse",
    "TrialId",
    "HFPowerLimitOptimizer",
    "OptimumSelector",
    "Energy",
    "Time",
    "ZeusCost",
    "MaxSlowdownConstraint",
    "PowerLimitMeasurement",
    "Ready",
    "Warmup",
    "Profiling",
    "Done",
    "report_step",
    "report_epoch",
]


def __getattr__(name: str):  # the Hugging Face adapter imports transformers only when asked for
    if name == "HFPowerLimitOptimizer":
        from ._huggingface import HFPowerLimitOptimizer

        return HFPowerLimitOptimizer
    raise AttributeError(f"module 'erg.optimizers' has no attribute {name!r}")
