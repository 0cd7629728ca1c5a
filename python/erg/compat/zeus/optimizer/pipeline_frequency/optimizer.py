"""``zeus.optimizer.pipeline_frequency.optimizer``: the rank client, erg's own."""

from erg.optimizers._pipeline_frequency import PipelineFrequencyOptimizer

__all__ = ["PipelineFrequencyOptimizer"]
