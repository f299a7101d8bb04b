"""The invariants every simulated program must satisfy (DESIGN §4), as one checker.

>>> from pypto.npu import simulate, check_invariants
>>> prof = simulate('''
... .program fill
... .tensor y f32[16,64] out
... .core aiv
...   TEXPANDS UB[0x0]:f32[8,64], 1.5
...   SET_FLAG V, MTE3, 0
...   WAIT_FLAG V, MTE3, 0
...   TSTORE y[%sub*8, 0], UB[0x0]:f32[8,64]
... ''', "tiny")
>>> check_invariants(prof)
"""

from __future__ import annotations

import os

import numpy as np

from pypto.npu.profile import Profile

__all__ = ["check_if_requested", "check_invariants"]

_EPS = 1e-6


def _fail(prof: Profile, msg: str) -> AssertionError:
    return AssertionError(f"{prof.program} on {prof.machine.name}: {msg}")


def check_invariants(prof: Profile, *, rerun: bool = True) -> None:
    """Raise AssertionError unless: no two instructions overlap on one pipe of one core; every
    buffer's occupancy stays within its capacity; each pipe's busy time is at most the makespan;
    the simulated cycles are at least the roofline bound (efficiency ≤ 1); and (``rerun``) a
    second run of the same request gives identical cycles, trace and outputs. A run the
    debugger stopped (``stop_after``) is partial: only the first three are checked."""
    if prof.traced:
        gp, _sid, start, end, _ = prof._arrays()
        for g in np.unique(gp):
            sel = gp == g
            s, e = start[sel], end[sel]
            order = np.argsort(s, kind="stable")
            s, e = s[order], e[order]
            if np.any(e < s):
                raise _fail(prof, f"an event ends before it starts on pipe {int(g)}")
            bad = np.nonzero(s[1:] < e[:-1] - _EPS)[0]
            if bad.size:
                i = int(bad[0])
                ev = [x for x in prof.events if x.start == s[i + 1]]
                raise _fail(
                    prof,
                    f"two instructions overlap on one pipe: [{s[i]}, {e[i]}) and "
                    f"[{s[i + 1]}, {e[i + 1]}) ({ev[:1]})",
                )
        for (core, space), (_t, level) in prof.occupancy.items():
            cap = prof.machine.buffer_bytes(space)
            if level.size and level.max() > cap:
                raise _fail(prof, f"{space} of {core} holds {level.max()} bytes > {cap}")
    for (core, pipe), b in prof.busy.items():
        if b > prof.cycles * (1 + 1e-9) + _EPS:
            raise _fail(prof, f"pipe {pipe} of {core} is busy {b} cycles > makespan {prof.cycles}")
    if prof.stopped is not None:
        return  # a run stopped by the debugger is partial: the bounds are for whole runs
    if prof.cycles < prof.roofline_cycles * (1 - 1e-9):
        raise _fail(
            prof,
            f"{prof.cycles} cycles beat the roofline lower bound {prof.roofline_cycles} "
            f"({prof.bound})",
        )
    if not 0 <= prof.efficiency <= 1 + 1e-9:
        raise _fail(prof, f"efficiency {prof.efficiency} outside [0, 1]")
    if rerun and prof.request is not None:
        from pypto.npu.simulator import simulate

        r = prof.request
        again = simulate(r.program, r.machine, r.inputs, **r.options)
        if again.cycles != prof.cycles or again.instructions != prof.instructions:
            raise _fail(prof, f"a second run gave {again.cycles} cycles, not {prof.cycles}")
        if prof.traced and not all(
            np.array_equal(a, b) for a, b in zip(prof._arrays()[:4], again._arrays()[:4])
        ):
            raise _fail(prof, "a second run gave a different trace")
        # a compiled function's profile holds its results; the GM tensors are kept aside
        outs = prof.outputs if isinstance(prof.outputs, dict) else prof._cache.get("gm_outputs")
        if (outs is None) != (again.outputs is None):
            raise _fail(prof, "a second run differs in having outputs")
        for k, v in (outs or {}).items():
            w = again.outputs[k] if again.outputs else None
            if w is None or v.tobytes() != w.tobytes():
                raise _fail(prof, f"a second run gave a different {k!r}")


def check_if_requested(prof: Profile) -> None:
    """In tests (``PYPTO_CHECK_SIM=1``, or ``rerun`` to also repeat each run) every simulated
    program is checked for the invariants of the machine model (DESIGN §4); otherwise
    nothing. The run must have been traced (``requested()`` says whether to trace)."""
    mode = os.environ.get("PYPTO_CHECK_SIM", "")
    if mode:
        check_invariants(prof, rerun=mode == "rerun")


def requested() -> bool:
    """Whether the environment asks for every simulated program to be checked."""
    return bool(os.environ.get("PYPTO_CHECK_SIM", ""))
