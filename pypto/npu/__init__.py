"""The simulated NPU: machine configurations, the simulator and its Profile.

>>> import pypto.npu as npu
>>> npu.machine("tiny").n_aiv
2
"""

from pypto.npu.invariants import check_invariants
from pypto.npu.machine import MACHINES, Machine, MachineError, machine
from pypto.npu.profile import Profile, RunRequest, TraceEvent
from pypto.npu.simulator import simulate

__all__ = [
    "MACHINES",
    "Machine",
    "MachineError",
    "Profile",
    "RunRequest",
    "TraceEvent",
    "check_invariants",
    "machine",
    "simulate",
]
