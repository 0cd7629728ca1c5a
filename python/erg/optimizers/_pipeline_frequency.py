"""PipelineFrequencyOptimizer over erg's native rank client (erg._core.pipeline_frequency)."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import _core, _env
from .._sync import make_sync


# The guardian: a separate process holding the read end of a pipe whose write end only the rank
# holds. It blocks reading; when the rank exits in any way (SIGKILL included) the pipe closes. A
# rank that reset its clocks itself writes "done" first; otherwise the guardian opens the devices
# (same environment, so the same GPU index) and resets the GPU's locked clocks.
_GUARDIAN = r"""
import sys
data = sys.stdin.buffer.read()
if data.endswith(b"done"):
    sys.exit(0)
gpu_index, rank_pid = int(sys.argv[1]), sys.argv[2]
from erg import _core
gpu = _core.discover().gpus[gpu_index]
for reset in (gpu.reset_gpu_locked_clocks, gpu.reset_memory_locked_clocks):
    try:
        reset()
    except Exception as e:
        print(f"erg clock guardian: GPU {gpu_index}: {e}", file=sys.stderr)
print(f"erg clock guardian: rank process {rank_pid} exited without resetting GPU {gpu_index}'s clocks; reset them",
      file=sys.stderr)
"""

_DAEMON_VARIABLES = ("ERG_DAEMON_SOCK", "ZEUSD_SOCK_PATH", "ERG_DAEMON_HOST_PORT", "ZEUSD_HOST_PORT")


def _start_guardian(device_id: int) -> "subprocess.Popen[bytes]":
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    # Its own session: a signal to the rank's process group does not take the guardian along.
    return subprocess.Popen([sys.executable, "-c", _GUARDIAN, str(device_id), str(os.getpid())],
                            stdin=subprocess.PIPE, env=env, start_new_session=True)


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
    step's time and energy with per-instruction breakdowns (docs/perseus.md). Instruction windows
    shorter than about two updates of the GPU's energy counter are counted in the result's
    ``coarse_energy_windows``; the online scheduler refuses such results while it profiles
    (``on_step_end`` raises ``InvalidArgumentError``, a ``ValueError``).

    ``share_job_id`` (erg's addition): a callable ``f(job_id or None) -> job_id`` that hands rank
    0's id to every rank; by default torch.distributed's ``broadcast_object_list`` (as Zeus),
    which must then be initialized for a job of several ranks. ``sync_with``: what to wait for
    before a clock change or a measurement edge (``"torch"`` by default, a no-op without CUDA).

    The clocks are reset by :meth:`close` and at interpreter exit; when this process is killed
    (SIGKILL included) by ergd if the GPU's setters go through it (``ERG_DAEMON_SOCK``), else by a
    guardian process (``guard_clocks``, default: on without ergd) that resets them when this
    process's end of a pipe closes.
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
        guard_clocks: Optional[bool] = None,
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
        self._native = None
        self._atexit = None
        if guard_clocks is None:
            guard_clocks = not any(os.environ.get(v) for v in _DAEMON_VARIABLES)
        # Before the first clock is locked, so no moment leaves them unguarded.
        self._guardian = _start_guardian(device_id) if guard_clocks else None
        try:
            native = _core.pipeline_frequency.Optimizer(
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
        except BaseException:
            self._release_guardian()  # the native side reset what it had locked
            raise
        self._native = native
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

    def _release_guardian(self) -> None:
        """Tells the guardian the clocks are reset (it exits without touching them)."""
        guardian, self._guardian = getattr(self, "_guardian", None), None
        if guardian is None:
            return
        try:
            guardian.stdin.write(b"done")
            guardian.stdin.close()
            guardian.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            guardian.kill()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report it to
            pass

    def close(self) -> None:
        """Resets the GPU's locked SM and memory clocks; nothing is locked afterwards."""
        native = getattr(self, "_native", None)
        if native is not None:
            try:
                native.reset_clocks()
            finally:
                self._release_guardian()
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
        """The ProfilingResults posted so far (Zeus's field names; s and J; erg's
        ``coarse_energy_windows`` only when positive)."""
        return self._native.results

    @property
    def instructions(self) -> List[Tuple[str, int, float, float]]:
        """The current (or last) step's instructions: (name, MHz, time s, energy J)."""
        return self._native.instructions
