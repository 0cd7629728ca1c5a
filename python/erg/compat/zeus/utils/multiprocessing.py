"""``warn_if_global_in_subprocess`` (``zeus.utils.multiprocessing``).

Zeus spawns processes (PowerMonitor, RAPL trackers), so a monitor built at import time in the
main module is built again in each child. erg spawns none, but a program may use
multiprocessing itself, so the warning is kept.
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import sys
import warnings
from typing import Any

__all__ = ["warn_if_global_in_subprocess"]


def _is_spawned_child() -> bool:
    return mp.parent_process() is not None and "__mp_main__" in sys.modules


def _called_from_module_level() -> bool:
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            return True
        frame = frame.f_back
    return False


def warn_if_global_in_subprocess(obj: Any) -> None:
    """Warns (``warnings``, as Zeus) when ``obj`` — a monitor, or a class name — is built during
    module import in a spawned child process: a global monitor, built again in every child."""
    if not _is_spawned_child() or not _called_from_module_level():
        return
    name = obj if isinstance(obj, str) else type(obj).__name__
    warnings.warn(
        f"{name} was instantiated during module import in a spawned subprocess. This usually means "
        "the monitor was created as a global variable, so the child process re-imported your main "
        "module and executed global code again. Move monitor construction under "
        '`if __name__ == "__main__":` or inside a function to avoid repeated imports and memory issues.',
        stacklevel=3,
    )
