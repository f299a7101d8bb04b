"""Checks of the Block IR (run after scheduling in tests, like ``check_jaxpr``).

* every buffer lies inside its memory space on the machine and is 32-byte aligned;
* buffers that a DMA or the cube touches (the ones with their own region) do not overlap;
* flags balance: within every loop body and at the top level, each ``(src, dst, event)`` is set
  as often as it is waited, so no kernel leaves a token behind for the next one.
"""

from __future__ import annotations

from collections import Counter

from pypto.block.ir import BInstr, BItem, BlockFunc, BLoop
from pypto.core.errors import PyptoError
from pypto.npu.machine import Machine


class BlockIRError(PyptoError):
    """An ill-formed Block IR."""


def _balance(items: tuple[BItem, ...], where: str) -> None:
    count: Counter[tuple[str, str, str]] = Counter()
    locs: dict[tuple[str, str, str], list[str]] = {}
    for it in items:
        if isinstance(it, BLoop):
            _balance(it.body, f"{where}, loop %{it.reg}")
            continue
        assert isinstance(it, BInstr)
        op = it.instr.op
        if op in ("SET_FLAG", "WAIT_FLAG"):
            p, q, e = (str(a) for a in it.instr.args)
            count[(p, q, e)] += 1 if op == "SET_FLAG" else -1
            if it.instr.loc:
                locs.setdefault((p, q, e), []).append(f"{op} at {it.instr.loc}")
    bad = {k: v for k, v in count.items() if v}
    if bad:
        (p, q, e), v = next(iter(bad.items()))
        # a hand-written program names the lines of the flag's sets and waits
        seen = f" ({', '.join(locs[(p, q, e)])})" if (p, q, e) in locs else ""
        raise BlockIRError(
            f"{where}: flag {p} -> {q} event {e} is set {'more' if v > 0 else 'less'} often "
            f"than waited ({abs(v)}){seen}"
        )


def verify(bf: BlockFunc, machine: Machine | None = None) -> None:
    """Raise :class:`BlockIRError` unless ``bf`` keeps the rules above."""
    for k in bf.kernels:
        for core, body in k.programs:
            _balance(body, f"block @{k.name} .{core}")
        for core, bufs in k.buffers:
            for b in bufs:
                if machine is not None:
                    cap = machine.buffer_bytes(b.space)
                    end = b.addr + b.stride * (b.slots - 1) + b.nbytes
                    if end > cap:
                        raise BlockIRError(
                            f"block @{k.name} .{core}: %{b.name} ends at {hex(end)}, "
                            f"past {b.space}'s {cap} bytes"
                        )
                    if b.addr % machine.align_bytes:
                        raise BlockIRError(f"block @{k.name}: %{b.name} is not aligned")
            own = [b for b in bufs if b.slots > 1]
            for i, a in enumerate(own):
                for b in own[i + 1 :]:
                    if a.space != b.space:
                        continue
                    a1 = a.addr + a.stride * a.slots
                    b1 = b.addr + b.stride * b.slots
                    if a.addr < b1 and b.addr < a1:
                        raise BlockIRError(
                            f"block @{k.name} .{core}: double buffers %{a.name} and %{b.name} "
                            "overlap"
                        )
