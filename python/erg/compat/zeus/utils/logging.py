"""Logging helpers (``zeus.utils.logging``): ``get_logger`` and ``FileAndConsole``.

erg's own Zeus-compatible modules log under Zeus's logger names (``zeus.monitor.energy``...)
but add no handler (a library leaves that to the program); ``get_logger`` is Zeus's, for code
that calls it: a stdout handler, ``ZEUS_LOG_LEVEL`` or ``level``, no propagation.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Union

__all__ = ["get_logger", "FileAndConsole"]


class FileAndConsole:
    """Like ``tee``: writes go to a file and to stdout, flushed each time."""

    def __init__(self, filepath: Union[Path, str]) -> None:
        self.file = open(filepath, "w")  # noqa: SIM115 (kept open, as Zeus)
        self.stdout = sys.stdout

    def write(self, message: str) -> None:
        self.file.write(message)
        self.stdout.write(message)
        self.file.flush()
        self.stdout.flush()

    def flush(self) -> None:
        self.file.flush()
        self.stdout.flush()


def get_logger(name: str, level: int = logging.INFO, propagate: bool = False) -> logging.Logger:
    """The logger ``name``, given (once) a stdout handler with Zeus's format."""
    if name in logging.Logger.manager.loggerDict:
        return logging.getLogger(name)
    logger = logging.getLogger(name)
    logger.propagate = propagate
    logger.setLevel(os.environ.get("ZEUS_LOG_LEVEL", level))
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[%(asctime)s] [%(name)s](%(filename)s:%(lineno)d) %(message)s"))
    logger.addHandler(handler)
    return logger
