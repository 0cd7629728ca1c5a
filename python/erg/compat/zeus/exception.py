"""Zeus's base exception (``zeus.exception``)."""

from __future__ import annotations

__all__ = ["ZeusBaseError"]


class ZeusBaseError(Exception):
    """Base of every Zeus exception. ``message`` holds the text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message
