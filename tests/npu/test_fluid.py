"""The fluid bandwidth server (:class:`pypto.npu.memory.Fluid`) late in a long run: a transfer
must finish even when the time left for it is below the resolution of the clock."""

from __future__ import annotations

import pytest

from pypto.npu.memory import Fluid


@pytest.mark.parametrize("cap", [37.0, 67.26726726726727, 80.0])
def test_a_transfer_finishes_when_the_clock_cannot_resolve_its_remainder(cap: float) -> None:
    # At 1e7 cycles one ulp of the clock is ~2e-9 cycles. Advancing the per-class byte clock by
    # the elapsed time can fall short of the finish mark by more than the byte tolerance while
    # the time still to go rounds to zero: the next completion is then "now" again, forever
    # (the seq-2048 decoder block built with fuse=False stopped like this at 5.29 M cycles).
    fl = Fluid(bandwidth=100.0)
    nxt = fl.add(1e7, 16.0, cap=cap, token="a")
    for _ in range(3):
        done, nxt = fl.complete(nxt)
        if done:
            assert done == ["a"]
            assert nxt == float("inf")
            assert fl.active == 0
            return
    pytest.fail(f"the transfer never finished (next completion {nxt!r})")
