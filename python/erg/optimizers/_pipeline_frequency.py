"""PipelineFrequencyOptimizer over erg's native rank client (erg._core.pipeline_frequency)."""

from __future__ import annotations

import atexit
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import _core, _env
from .._sync import make_sync


def _torch_share_job_id(world_size: int) -> Optional[Callable[[Optional[str]], str]]:
    """Rank 0's job id to every rank through torch.distributed (Zeus's broadcast_object_list), or
    None when torch.distributed is not initialized."""
    try:
        import torch.distributed as dist  # noqa: PLC0415 - imported only when needed
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None

    def share(mine: Optional[str]) -> str:
        box = [mine]
        dist.broadcast_object_list(box, src=0)
        return str(box[0])

    return share


class PipelineFrequencyOptimizer:
    """The rank side of Perseus: one per rank of a pipeline-parallel job (Zeus's
    ``PipelineFrequencyOptimizer``; same arguments in the same order).

    Rank 0 registers the job with the Perseus server (``erg perseus serve``) and hands the id to
    the other ranks; every rank locks its GPU's memory clock at its highest, registers with the SM
    clocks supported there and fetches its schedule. Then, per training step::

        opt.on_step_begin()
        for each forward / backward computation of the pipeline schedule:
            opt.on_instruction_begin("forward")     # locks the SM clock the plan gives it
            ...
            opt.on_instruction_end("forward")       # its time and energy are measured
        opt.on_step_end()                           # posts the step's result to the server

    Unlike Zeus's client, every step is a round of the server: ``on_step_begin`` (from the second
    step) fetches the round's schedule, waiting for every rank, and ``on_step_end`` posts the
    step's time and energy with per-instruction breakdowns (docs/perseus.md).

    ``share_job_id`` (erg's addition): a callable ``f(job_id or None) -> job_id`` that hands rank
    0's id to every rank; by default torch.distributed's ``broadcast_object_list`` (as Zeus),
    which must then be initialized for a job of several ranks. ``sync_with``: what to wait for
    before a clock change or a measurement edge (``"torch"`` by default, a no-op without CUDA).

    The clocks are reset by :meth:`close`, at interpreter exit, and — when the GPU's setters go
    through ergd (``ERG_DAEMON_SOCK``) — by ergd when this process exits in any way, SIGKILL
    included.
    """

    def __init__(
        self,
        rank: int,
        dp_rank: int,
        pp_rank: int,
        tp_rank: int,
        device_id: int,
        dp_degree: int,
        pp_degree: int,
        tp_degree: int,
        world_size: int,
        server_url: str,
        job_metadata: Optional[str] = None,
        *,
        share_job_id: Optional[Callable[[Optional[str]], str]] = None,
        sync_with: Any = "torch",
        read_timeout_s: float = 660.0,
    ) -> None:
        gpus = _env.inventory().gpus
        if not 0 <= device_id < len(gpus):
            raise ValueError(f"device_id {device_id} is not one of this process's {len(gpus)} GPU(s)")
        if share_job_id is None and world_size > 1:
            share_job_id = _torch_share_job_id(world_size)
            if share_job_id is None:
                raise RuntimeError(
                    "PipelineFrequencyOptimizer: a job of several ranks needs torch.distributed initialized "
                    "(to share rank 0's job id), or pass share_job_id="
                )
        self.rank = rank
        self.device_id = device_id
        self._sync = make_sync(sync_with, strict=False)
        self._native = _core.pipeline_frequency.Optimizer(
            gpus[device_id],
            rank,
            dp_rank,
            pp_rank,
            tp_rank,
            dp_degree,
            pp_degree,
            tp_degree,
            world_size,
            server_url,
            job_metadata=job_metadata,
            share_job_id=share_job_id,
            read_timeout_s=read_timeout_s,
        )
        ref = weakref.ref(self)
        self._atexit = lambda: (lambda o: o.close() if o is not None else None)(ref())
        atexit.register(self._atexit)

    def _wait(self) -> None:
        if self._sync is not None:
            self._sync([self.device_id])

    def on_step_begin(self) -> None:
        """Begins a step; from the second step on, fetches its schedule (waits for every rank).
        DeviceTimeoutError when the server evicted the job because a rank never asked."""
        self._wait()
        self._native.on_step_begin()

    def on_step_end(self) -> None:
        """Ends a step (every planned instruction must have run) and posts its result."""
        self._wait()
        self._native.on_step_end()

    def on_instruction_begin(self, name: str) -> None:
        """Before a ``"forward"`` or ``"backward"``: must be the next one the schedule plans;
        locks the GPU's SM clock at its frequency."""
        self._wait()
        self._native.on_instruction_begin(name)

    def on_instruction_end(self, name: str) -> None:
        """After the instruction begun last (same name)."""
        self._wait()
        self._native.on_instruction_end(name)

    def close(self) -> None:
        """Resets the GPU's locked SM and memory clocks; nothing is locked afterwards."""
        native = getattr(self, "_native", None)
        if native is not None:
            native.reset_clocks()
        if getattr(self, "_atexit", None) is not None:
            atexit.unregister(self._atexit)
            self._atexit = None

    @property
    def job_id(self) -> str:
        return self._native.job_id

    @property
    def schedule(self) -> List[Tuple[str, int]]:
        """This round's (instruction, MHz) list, in execution order."""
        return list(self._native.schedule)

    @property
    def available_frequencies(self) -> List[int]:
        """The SM clocks registered with the server (MHz, highest first)."""
        return list(self._native.available_frequencies)

    @property
    def current_frequency(self) -> Optional[int]:
        """The SM clock locked last (MHz); None after close()."""
        return self._native.current_frequency

    @property
    def results(self) -> List[Dict[str, Any]]:
        """The ProfilingResults posted so far (Zeus's field names; s and J)."""
        return self._native.results

    @property
    def instructions(self) -> List[Tuple[str, int, float, float]]:
        """The current (or last) step's instructions: (name, MHz, time s, energy J)."""
        return self._native.instructions
