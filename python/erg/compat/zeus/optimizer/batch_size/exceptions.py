"""Zeus's batch-size optimizer errors (``zeus.optimizer.batch_size.exceptions``, with Zeus's
spellings), each also an erg error."""

from __future__ import annotations

from erg._errors import ErgError

from ...exception import ZeusBaseError

__all__ = [
    "ZeusBSORuntimError",
    "ZeusBSOTrainFailError",
    "ZeusBSOConfigError",
    "ZeusBSOOperationOrderError",
    "ZeusBSOBadOperationError",
]


class ZeusBSORuntimError(ZeusBaseError, ErgError, RuntimeError):
    """The server did not answer, or answered an error (the message names its status)."""


class ZeusBSOTrainFailError(ZeusBaseError, ErgError, RuntimeError):
    """The run stopped without converging: this batch size failed; relaunch and another is picked."""


class ZeusBSOConfigError(ZeusBaseError, ErgError, ValueError):
    """The GPUs do not fit the optimizer (none, or of different models)."""


class ZeusBSOOperationOrderError(ZeusBaseError, ErgError, RuntimeError):
    """The callbacks were called out of order (on_evaluate before get_batch_size)."""


class ZeusBSOBadOperationError(ZeusBaseError, ErgError, RuntimeError):
    """An operation this process may not do (a rank other than 0 asking for the batch size)."""
