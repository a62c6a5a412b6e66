"""Fault injection for tests: SIGKILL at a protocol point (``STREAMFLOW_KILL_AT``), or raise
in-process (:func:`inject`). The hooks and their points are documented in :mod:`streamflow._faults`;
they live in a small internal module so production code never imports this test kit.
"""

from .._faults import CONNECTOR_POINTS as CONNECTOR_POINTS
from .._faults import POINTS as POINTS
from .._faults import InjectedFault as InjectedFault
from .._faults import clear as clear
from .._faults import hits as hits
from .._faults import inject as inject
from .._faults import point as point
