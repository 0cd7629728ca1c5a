"""SoC devices (``zeus.device.soc``): ``get_soc()``. erg has no SoC backend yet, so it raises
ZeusSoCInitError ("No observable SoC was found on the current machine."), as Zeus does on a
machine without Apple silicon or Jetson."""

from __future__ import annotations

from .common import *  # noqa: F403
from .common import SoC, ZeusSoCInitError
from .common import __all__ as _common_all

__all__ = ["get_soc", *_common_all]


def get_soc() -> SoC:
    """The SoC of this machine; ZeusSoCInitError since erg measures none yet."""
    raise ZeusSoCInitError("No observable SoC was found on the current machine.")
