"""Heterogeneous data-parallel training (docs/hetero.md): each rank's share of the global batch and
its GPU's power limit, from a plan made by ``erg hetero plan --json``.

    plan = erg.hetero.load_plan("plan.json")            # or the JSON text, or the parsed dict
    with erg.hetero.RankPlan(plan, rank=dist.get_rank()) as part:
        loader = DataLoader(dataset, batch_size=part.batch_size, ...)
        for batch in loader:
            ...                                          # the GPU runs at part.power_limit_w

The limit is set through erg's devices (the same path as every erg limit: NVML, ergd for the
privileged call, or the simulated machine) on entering and the GPU's previous limit is put back on
leaving — also at interpreter exit when the context is never left (``apply()`` without ``with``).
Plan indices are ranks: rank r takes the plan's GPU r. Which local GPU it runs on is ``gpu_index``
(default: ``LOCAL_RANK``, else the rank).
"""

from __future__ import annotations

import atexit
import json
import os
from typing import Any, Optional, Union

from . import _env

__all__ = ["load_plan", "RankPlan"]


def load_plan(plan: Union[str, os.PathLike, dict]) -> dict:
    """The plan as a dict: ``plan`` is the output of ``erg hetero plan --json`` (a dict, its JSON
    text, or a path to it). ValueError for anything else."""
    if isinstance(plan, dict):
        data = plan
    else:
        text = str(plan)
        if not text.lstrip().startswith("{"):
            with open(text, encoding="utf-8") as f:
                text = f.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"not a plan from `erg hetero plan --json`: {e}") from None
    if data.get("kind") != "hetero-plan" or not isinstance(data.get("plans"), dict):
        raise ValueError("not a plan from `erg hetero plan --json` (kind 'hetero-plan' with 'plans')")
    return data


class RankPlan:
    """One rank's part of a heterogeneous plan; a context manager that sets its GPU's power limit.

    ``method``: which of the plan's methods to follow (``heuristic`` by default; ``brute`` or
    ``baseline`` when the plan has them). ValueError naming the cause for a rank or method the plan
    lacks.
    """

    def __init__(self, plan: Union[str, os.PathLike, dict], rank: int, gpu_index: Optional[int] = None,
                 method: str = "heuristic") -> None:
        data = load_plan(plan)
        plans = data["plans"]
        if method not in plans:
            raise ValueError(f"the plan has no '{method}' method (it has: {', '.join(sorted(plans))})")
        gpus = plans[method]["gpus"]
        if not 0 <= rank < len(gpus):
            raise ValueError(f"rank {rank} is outside the plan's {len(gpus)} GPUs")
        part = gpus[rank]
        self.rank = rank
        self.method = method
        self.global_batch: int = int(data["global_batch"])
        self.batch_size: int = int(part["batch_size"])
        self.power_limit_w: float = float(part["power_limit_w"])
        self.gpu_type: str = str(part["gpu_type"])
        self.predicted_step_time_s: float = float(part["step_time_s"])
        if gpu_index is None:
            gpu_index = int(os.environ.get("LOCAL_RANK", rank))
        self.gpu_index = gpu_index
        self._gpu: Any = None
        self._previous_mw: Optional[float] = None

    def _find_gpu(self) -> Any:
        for g in _env.inventory().gpus:
            if g.index == self.gpu_index:
                return g
        raise ValueError(f"no GPU {self.gpu_index} in this process's devices")

    def apply(self) -> "RankPlan":
        """Sets the plan's power limit on this rank's GPU (remembering the previous one)."""
        if self._gpu is not None:
            return self
        gpu = self._find_gpu()
        self._previous_mw = gpu.power_limit_mw()
        gpu.set_power_limit_mw(self.power_limit_w * 1000.0)
        self._gpu = gpu
        atexit.register(self.restore)
        return self

    def restore(self) -> None:
        """Puts the GPU's previous power limit back (idempotent)."""
        gpu, self._gpu = self._gpu, None
        if gpu is None:
            return
        atexit.unregister(self.restore)
        gpu.set_power_limit_mw(self._previous_mw)

    def __enter__(self) -> "RankPlan":
        return self.apply()

    def __exit__(self, *exc: Any) -> None:
        self.restore()

    def __repr__(self) -> str:
        return (f"RankPlan(rank={self.rank}, gpu_type={self.gpu_type!r}, batch_size={self.batch_size}, "
                f"power_limit_w={self.power_limit_w:g}, method={self.method!r})")
