"""Zeus's pipeline-frequency optimizer client (``zeus.optimizer.pipeline_frequency``) over erg's.

``PipelineFrequencyOptimizer(rank, dp_rank, pp_rank, tp_rank, device_id, dp_degree, pp_degree,
tp_degree, world_size, server_url, job_metadata=None)`` as in Zeus; the server is
``erg perseus serve``. Differences (docs/perseus.md): each step is a round of the server —
``on_step_begin`` fetches the step's schedule and ``on_step_end`` posts its time and energy with
per-instruction breakdowns, which Zeus's client never does; the clocks are set in this process
(directly or through ergd), not in a separate controller process; rank 0's job id is shared with
torch.distributed as in Zeus, or with erg's ``share_job_id=`` keyword.
"""

from .optimizer import PipelineFrequencyOptimizer

__all__ = ["PipelineFrequencyOptimizer"]
