"""erg's exception hierarchy. erg._core raises these from one translator of erg::ErrorCode.

Each class also derives from the closest built-in exception, so ``except ValueError`` (what Zeus
raises for window misuse) and ``except PermissionError`` keep working.
"""

__all__ = [
    "ErgError",
    "NotSupportedError",
    "NoPermissionError",
    "NotFoundError",
    "InvalidArgumentError",
    "DriverError",
    "GpuLostError",
    "IoError",
    "UnavailableError",
    "DeviceTimeoutError",
    "AlreadyExistsError",
    "InternalError",
]


class ErgError(Exception):
    """Base of every error erg raises. ``code`` is erg's stable error name (``not_found``...)."""

    code: str = "internal"


class NotSupportedError(ErgError, NotImplementedError):
    """The device or driver cannot do this (e.g. no energy counter before Volta)."""

    code = "not_supported"


class NoPermissionError(ErgError, PermissionError):
    """The caller lacks the privilege (root, CAP_SYS_ADMIN, file mode)."""

    code = "no_permission"


class NotFoundError(ErgError, ValueError, LookupError):
    """No such device, file or measurement window."""

    code = "not_found"


class InvalidArgumentError(ErgError, ValueError):
    """A value out of range or malformed input."""

    code = "invalid_argument"


class DriverError(ErgError, RuntimeError):
    """The vendor library failed."""

    code = "driver_error"


class GpuLostError(DriverError):
    """The GPU fell off the bus or needs a reset."""

    code = "gpu_lost"


class IoError(ErgError, OSError):
    """A read or write of a file or socket failed."""

    code = "io"


class UnavailableError(ErgError, RuntimeError):
    """The library, driver or service is absent, or a framework asked for is not usable."""

    code = "unavailable"


class DeviceTimeoutError(ErgError, TimeoutError):
    """The device or service did not answer in time."""

    code = "timeout"


class AlreadyExistsError(ErgError, ValueError):
    """A duplicate name (e.g. a measurement window that is already open)."""

    code = "already_exists"


class InternalError(ErgError, RuntimeError):
    """A bug in erg."""

    code = "internal"
