"""Time, energy, power and temperature monitors (``zeus.monitor``); ``power_streaming`` streams
power from zeusd or ergd daemons.

    from erg.compat.zeus.monitor import ZeusMonitor     # was: from zeus.monitor import ZeusMonitor
"""

from .energy import Measurement, ZeusMonitor
from .power import PowerDomain, PowerMonitor
from .temperature import TemperatureMonitor

__all__ = ["ZeusMonitor", "Measurement", "PowerMonitor", "PowerDomain", "TemperatureMonitor"]
