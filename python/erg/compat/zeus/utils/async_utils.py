"""``create_task`` (``zeus.utils.async_utils``): an asyncio task whose exception is logged."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Coroutine, Optional, TypeVar

__all__ = ["create_task"]

_T = TypeVar("_T")
_default_logger = logging.getLogger("zeus.utils.async_utils")


def _log_exception(task: "asyncio.Task[Any]", logger: logging.Logger) -> None:
    try:
        task.result()
    except asyncio.CancelledError:
        pass
    except Exception:
        logger.exception("Exception raised by task = %r", task)


def create_task(coroutine: Coroutine[Any, Any, _T], logger: Optional[logging.Logger] = None) -> "asyncio.Task[_T]":
    """Schedules ``coroutine`` on the running loop; an exception it raises is logged to
    ``logger`` (not lost, as with a bare ``create_task`` whose task nobody awaits)."""
    task = asyncio.get_running_loop().create_task(coroutine)
    task.add_done_callback(functools.partial(_log_exception, logger=logger or _default_logger))
    return task
