"""Optimizers for various knobs (``zeus.optimizer``). The power-limit one is in ``.power_limit``."""

from __future__ import annotations

from typing import List

__all__: List[str] = []
