"""Learning-rate scaling rules for a changed batch size (``zeus.utils.lr_scaler``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["SquareRootScaler", "LinearScaler"]


@dataclass
class SquareRootScaler:
    """``lr * sqrt(new_bs / bs)``."""

    bs: int
    lr: float

    def compute_lr(self, new_bs: int) -> float:
        return self.lr * math.sqrt(new_bs / self.bs)


@dataclass
class LinearScaler:
    """``lr * new_bs / bs``."""

    bs: int
    lr: float

    def compute_lr(self, new_bs: int) -> float:
        return self.lr * new_bs / self.bs
