"""Private helpers of erg.compat.zeus: errors that are erg's and Zeus's at once, the wall clock."""

from __future__ import annotations

import time as _time
from typing import Any, Iterable, List, Optional, Tuple, TypeVar

from erg import _core
from erg._errors import InvalidArgumentError, NoPermissionError

__all__: List[str] = []


class InvalidIndexError(InvalidArgumentError, IndexError):
    """A GPU or CPU index that does not exist. erg's InvalidArgumentError and, as the list
    lookups in Zeus raise, an IndexError (``except IndexError:`` written for Zeus still works)."""


class RaplNoPermissionError(NoPermissionError, RuntimeError):
    """RAPL cannot be read without privilege and CPU indices were asked for: the RuntimeError
    ZeusMonitor raises there, and erg's NoPermissionError."""


def check_indices(indices: Iterable[Any], count: int, what: str) -> List[int]:
    """``indices`` as a list of ints in range(count), else InvalidIndexError naming the first bad one."""
    out = []
    for i in indices:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < count:
            raise InvalidIndexError(f"{what} index {i!r} is out of range ({count} {what}s)")
        out.append(i)
    return out


def wall_offset() -> float:
    """``time.time()`` minus the monitors' monotonic clock, seconds: the shift that turns a native
    timestamp into Zeus's ``time.time()`` one. The closest of a few paired reads."""
    best = None
    for _ in range(3):
        a = _core.monotonic()
        w = _time.time()
        b = _core.monotonic()
        if best is None or b - a < best[0]:
            best = (b - a, w - (a + b) / 2.0)
    assert best is not None
    return best[1]


_FOREVER = 9.0e9  # seconds of the monitor clock; still fits the native int64 nanoseconds
_SLACK = 1e-6  # s: more than a time.time() value's rounding (~0.24 µs) in float64
_P = TypeVar("_P", bound=Tuple[float, Any])


def native_span(start: Optional[float], end: Optional[float], offset: float) -> Tuple[float, float]:
    """The monitor-clock span to query for ``time.time()`` bounds (None: unbounded), widened by
    a µs so the float round trip cannot drop a sample that sits on a bound (see ``within``)."""
    return (0.0 if start is None else start - offset - _SLACK, _FOREVER if end is None else end - offset + _SLACK)


def within(points: Iterable[_P], start: Optional[float], end: Optional[float]) -> List[_P]:
    """The ``(time.time() timestamp, value)`` points with start <= t <= end, compared on the
    timestamps as returned, so a bound copied from a returned timestamp includes that sample."""
    return [p for p in points if (start is None or p[0] >= start) and (end is None or p[0] <= end)]
