"""Aggregating a measurement across the ranks of an initialized ``torch.distributed`` group."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class AggregatedMeasurement:
    """One window over every rank: ``time`` is the slowest rank's, energies are summed."""

    name: str
    time: float
    gpu_energy: float
    cpu_energy: float
    dram_energy: float
    world_size: int
    per_rank: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def total_energy(self) -> float:
        return self.gpu_energy + self.cpu_energy + self.dram_energy


def _summary(m: Any) -> Dict[str, Any]:
    return {
        "name": m.name,
        "time": float(m.time),
        "gpu_energy": dict(m.gpu_energy),
        "cpu_energy": dict(m.cpu_energy or {}),
        "dram_energy": dict(m.dram_energy or {}),
    }


def aggregate(measurement: Any, group: Optional[Any] = None) -> AggregatedMeasurement:
    """Collective: every rank of ``group`` calls it with its measurement of the same window.

    Returns the same AggregatedMeasurement on every rank (energy summed, time max). Works with
    any backend that supports ``all_gather_object`` (gloo, nccl). Raises UnavailableError if
    torch.distributed is not initialized.
    """
    import torch.distributed as dist  # lazy: never imported by `import erg`

    from ._errors import UnavailableError

    if not dist.is_available() or not dist.is_initialized():
        raise UnavailableError("erg.distributed.aggregate needs an initialized torch.distributed process group")
    world = dist.get_world_size(group)
    gathered: List[Any] = [None] * world
    dist.all_gather_object(gathered, _summary(measurement), group=group)
    return AggregatedMeasurement(
        name=gathered[0]["name"],
        time=max(g["time"] for g in gathered),
        gpu_energy=sum(sum(g["gpu_energy"].values()) for g in gathered),
        cpu_energy=sum(sum(g["cpu_energy"].values()) for g in gathered),
        dram_energy=sum(sum(g["dram_energy"].values()) for g in gathered),
        world_size=world,
        per_rank=gathered,
    )
