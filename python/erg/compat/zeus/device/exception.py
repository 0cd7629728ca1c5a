"""Zeus's base device exceptions (``zeus.device.exception``)."""

from __future__ import annotations

from ..exception import ZeusBaseError

__all__ = ["ZeusBaseGPUError", "ZeusBaseCPUError", "ZeusBaseSoCError", "ZeusdError"]


class ZeusBaseGPUError(ZeusBaseError):
    """Zeus base GPU exception class."""


class ZeusBaseCPUError(ZeusBaseError):
    """Zeus base CPU exception class."""


class ZeusBaseSoCError(ZeusBaseError):
    """Zeus base SoC exception class."""


class ZeusdError(ZeusBaseGPUError):
    """An error from the Zeus daemon (erg: from ergd)."""
