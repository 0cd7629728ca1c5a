"""``get_env`` (``zeus.utils.env``): an environment variable cast to a type."""

from __future__ import annotations

import os
from typing import Optional, Type, TypeVar, cast

__all__ = ["get_env"]

_T = TypeVar("_T")


def get_env(name: str, valtype: Type[_T], default: Optional[_T] = None) -> _T:
    """``os.environ[name]`` as ``valtype``. A bool must be "true" or "false" (any case), else
    ValueError; a missing variable is ``default``, or ValueError when there is none."""
    try:
        if valtype is bool:
            val = os.environ[name].lower()
            if val not in ("true", "false"):
                raise ValueError(f"Strange boolean environment variable value '{val}'")
            return cast(_T, val == "true")
        return valtype(os.environ[name])  # type: ignore[call-arg]
    except KeyError:
        if default is not None:
            return default
        raise ValueError(f"Missing environment variable '{name}'") from None
