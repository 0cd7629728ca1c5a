"""The step protocol of ``erg optimize power-limit -- CMD`` (docs/power-limit-optimizer.md): erg
passes CMD a pipe's write end as the file descriptor named in ERG_OPTIMIZER_FD; CMD writes the
line ``step`` at the beginning of every training step and ``epoch`` at the end of every epoch."""

from __future__ import annotations

import os
from typing import Optional

_fd: Optional[int] = None
_checked = False


def _target() -> Optional[int]:
    global _fd, _checked
    if not _checked:
        _checked = True
        _fd = None
        value = os.environ.get("ERG_OPTIMIZER_FD")
        if value:
            try:
                fd = int(value)
                os.fstat(fd)
                _fd = fd
            except (ValueError, OSError):
                _fd = None
    return _fd


def _send(line: bytes) -> bool:
    fd = _target()
    if fd is None:
        return False
    try:
        os.write(fd, line)  # one write of a few bytes: atomic on a pipe
        return True
    except OSError:  # erg has gone: train on without it
        return False


def report_step() -> bool:
    """Tells ``erg optimize`` a training step begins. False (and nothing happens) when not run
    under it (no ERG_OPTIMIZER_FD) or when it has gone."""
    return _send(b"step\n")


def report_epoch() -> bool:
    """Tells ``erg optimize`` an epoch ended. False when not run under it."""
    return _send(b"epoch\n")
