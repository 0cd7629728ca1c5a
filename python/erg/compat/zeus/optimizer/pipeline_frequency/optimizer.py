"""``zeus.optimizer.pipeline_frequency.optimizer``: the rank client, erg's own as a Zeus ``Callback``."""

from erg.optimizers._pipeline_frequency import PipelineFrequencyOptimizer as _ErgPipelineFrequencyOptimizer

from ...callback import Callback

__all__ = ["PipelineFrequencyOptimizer"]


class PipelineFrequencyOptimizer(_ErgPipelineFrequencyOptimizer, Callback):
    """Zeus's ``PipelineFrequencyOptimizer`` (a ``Callback``, so ``CallbackSet`` drives its hooks):
    erg's ``erg.optimizers.PipelineFrequencyOptimizer`` with the same arguments."""
