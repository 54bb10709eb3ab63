"""Client processes of the simulation: :class:`Producer` and :class:`Consumer`.

The implementations live in :mod:`epochlab.sim.producer` and :mod:`epochlab.sim.consumer`
(split to keep files small); this module is their table of contents.
"""

from epochlab.sim.consumer import Consumer
from epochlab.sim.producer import Producer

__all__ = ["Consumer", "Producer"]
