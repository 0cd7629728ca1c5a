"""Helpers shared by the device classes (``zeus.device.common``): the SYS_ADMIN check and the
camelCase aliases older Zeus code calls (``getTotalEnergyConsumption``...)."""

from __future__ import annotations

import abc
import functools
import logging
import warnings
from typing import Any, Callable, Dict, TypeVar

__all__ = ["has_sys_admin", "deprecated_alias", "DeprecatedAliasABCMeta"]

logger = logging.getLogger("zeus.device.common")

_F = TypeVar("_F", bound=Callable[..., Any])
_SYS_ADMIN_BIT = 21  # CAP_SYS_ADMIN in the capability bitmask


@functools.lru_cache(maxsize=1)
def has_sys_admin() -> bool:
    """Whether this process has the SYS_ADMIN capability (CapEff bit 21 of /proc/self/status).
    False when it cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff"):
                    has = bool(int(line.split()[1], 16) & (1 << _SYS_ADMIN_BIT))
                    logger.info("Read security capabilities from /proc/self/status -- SYS_ADMIN: %s", has)
                    return has
    except (OSError, ValueError, IndexError):
        logger.info("Failed to read capabilities from /proc/self/status", exc_info=True)
    return False


def deprecated_alias(old_name: str) -> Callable[[_F], _F]:
    """Marks a snake_case method so DeprecatedAliasABCMeta also defines ``old_name`` for it."""

    def mark(fn: _F) -> _F:
        fn._deprecated_alias = old_name  # type: ignore[attr-defined]
        return fn

    return mark


def _alias(old_name: str, new_name: str) -> Callable[..., Any]:
    warned = [False]

    def deprecated_method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not warned[0]:
            warnings.warn(
                f"'{old_name}' is deprecated and will be removed in a future version. Use '{new_name}' instead.",
                DeprecationWarning,
                stacklevel=2,
            )
            warned[0] = True
        return getattr(self, new_name)(*args, **kwargs)

    deprecated_method.__name__ = old_name
    deprecated_method.__qualname__ = old_name
    deprecated_method.__doc__ = f"Deprecated alias of ``{new_name}`` (warns once)."
    return deprecated_method


class DeprecatedAliasABCMeta(abc.ABCMeta):
    """ABCMeta that adds, for each method marked with ``@deprecated_alias("oldName")`` in the class
    or its bases, a method ``oldName`` that warns once (DeprecationWarning) and calls the new one."""

    def __new__(mcs, name: str, bases: tuple, namespace: Dict[str, Any], **kwargs: Any) -> Any:
        cls = super().__new__(mcs, name, bases, namespace, **kwargs)
        # Subclasses inherit the aliases, which call the name they override.
        for attr, value in namespace.items():
            old = getattr(value, "_deprecated_alias", None)
            if old and old not in namespace:
                setattr(cls, old, _alias(old, attr))
        return cls
