"""Zeus-compatible API (ml-energy/zeus 0.16) over erg: a Zeus program runs with only its imports
changed, ``zeus.X`` becoming ``erg.compat.zeus.X``:

    from erg.compat.zeus.monitor import ZeusMonitor          # was: from zeus.monitor import ...
    from erg.compat.zeus.monitor.power import PowerMonitor
    from erg.compat.zeus.device import get_gpus

Modules: ``monitor`` (``energy``, ``power``, ``temperature``), ``device`` (``gpu``, ``cpu``,
``soc``), ``utils``, ``callback``, ``exception``. Names, signatures, defaults, units, errors
(each also an erg error) and log records (Zeus's logger names) are Zeus's; the deliberate
differences are listed, each with its test, in docs/migrating-from-zeus.md.

``ZeusMonitor``, ``Measurement``, ``PowerMonitor``, ``PowerDomain`` and ``PowerSample`` are also
importable from here, as in earlier versions of erg.
"""

from .monitor.energy import Measurement, ZeusMonitor
from .monitor.power import PowerDomain, PowerMonitor, PowerSample

#: The Zeus release whose API this package mirrors.
__version__ = "0.16.0"

__all__ = ["ZeusMonitor", "Measurement", "PowerMonitor", "PowerDomain", "PowerSample"]
