"""Zeus's cost metric and the legacy power-log readers (``zeus.utils.metric``).

The log is a CSV with a header ``Time,Power`` (a timestamp, then mW) whose last line is
incomplete and skipped, as Zeus reads it (``skipfooter=1``). Read with the standard library
(Zeus uses pandas and scikit-learn); the integral is the same trapezoid rule.
"""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from pathlib import Path
from typing import List, Optional, Tuple, Union

__all__ = ["zeus_cost", "energy", "avg_power"]


def zeus_cost(energy: float, time: float, eta_knob: float, max_power: Union[int, float]) -> float:
    """Zeus's energy-time cost: ``eta_knob * energy + (1 - eta_knob) * max_power * time``
    (J, s, W; ``eta_knob`` in [0, 1], not checked)."""
    return eta_knob * energy + (1 - eta_knob) * max_power * time


def _read(logfile: Union[Path, str]) -> List[Tuple[datetime, float]]:
    with open(logfile, newline="") as f:
        rows = list(csv.DictReader(f))
    rows = rows[:-1]  # the footer line (skipfooter=1)
    return [(datetime.fromisoformat(r["Time"].strip()), float(r["Power"])) for r in rows]


def _auc(x: List[float], y: List[float]) -> float:
    """Trapezoid area under (x, y); x must be monotonic (as sklearn.metrics.auc)."""
    if len(x) < 2:
        raise ValueError(
            f"At least 2 points are needed to compute area under curve, but x.shape = {len(x)}"
        )
    dx = [b - a for a, b in zip(x, x[1:])]
    direction = 1.0
    if any(d < 0 for d in dx):
        if all(d <= 0 for d in dx):
            direction = -1.0
        else:
            raise ValueError(f"x is neither increasing nor decreasing : {x}.")
    return direction * sum(d * (y0 + y1) / 2.0 for d, y0, y1 in zip(dx, y, y[1:]))


def _series(rows: List[Tuple[datetime, float]]) -> Tuple[List[float], List[float]]:
    if not rows:
        return [], []
    t0 = rows[0][0]
    return [(t - t0).total_seconds() for t, _ in rows], [p / 1000.0 for _, p in rows]


def energy(logfile: Union[Path, str], start: Optional[float] = None, end: Optional[float] = None) -> float:
    """Energy (J) of the power log between ``start`` and ``end`` seconds from the log's first
    sample; a negative bound counts back from its last sample."""
    rows = _read(logfile)
    first, last = rows[0][0], rows[-1][0]
    if start is not None:
        origin = first if start >= 0.0 else last
        rows = [r for r in rows if r[0] >= origin + timedelta(seconds=start)]
    if end is not None:
        origin = first if end >= 0.0 else last
        rows = [r for r in rows if r[0] <= origin + timedelta(seconds=end)]
    seconds, watts = _series(rows)
    return _auc(seconds, watts)


def avg_power(logfile: Union[Path, str], start: Optional[float] = None, end: Optional[float] = None) -> float:
    """Average power (W) of the power log between ``start`` and ``end`` seconds from its first
    sample. ValueError when fewer than two samples remain."""
    rows = _read(logfile)
    if start is not None:
        rows = [r for r in rows if r[0] >= rows[0][0] + timedelta(seconds=start)]
    if end is not None:
        rows = [r for r in rows if r[0] <= rows[0][0] + timedelta(seconds=end)]
    seconds, watts = _series(rows)
    area = _auc(seconds, watts)
    return area / (max(seconds) - min(seconds))
