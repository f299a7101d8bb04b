"""The input gradient of a shifted-rows convolution as one product over shifted rows.

A stride-1 convolution is ``concat([flat[s_t : s_t + R] for t], axis=1) @ W`` over the rows of
its flattened, padded input (``pypto/ops/conv.py``). Autodiff transposes that into the product
``P = G @ B`` (``G`` the output's cotangent, ``B = Wᵀ``) and the sum of ``P``'s column parts,
each zero-padded ``s_t`` rows down to ``flat``'s ``N`` rows: ``T`` pads and ``T - 1`` additions
of the input's size, after writing a product ``T`` times its size. That sum is itself a product
over shifted rows,

    Σ_t pad(G @ B_t, s_t) = concat_t(Gp[S - s_t : S - s_t + N]) @ concat_t(B_t, axis=0),

with ``Gp`` the cotangent padded ``S = max s_t`` rows above and ``N - R`` below: one pad of
the output's size and one matmul, whose A the NPU reads in place like the forward's.

>>> import numpy as np, pypto as pto
>>> def loss(x, w):
...     y = pto.lax.conv_general_dilated(x, w, (1, 1), "SAME")
...     return (y * y).sum()
>>> g = pto.jit(pto.grad(loss)).lower(np.ones((1, 4, 8, 8), np.float32),
...                                   np.ones((4, 4, 3, 3), np.float32))
>>> [(e.op, e.out.aval.shape) for e in g.tensor_ir.eqns if e.op in ("lax_pad", "matmul")]
[('lax_pad', (2, 10, 10, 4)), ('matmul', (100, 4)), ('lax_pad', (1, 10, 10, 4)), \
('lax_pad', (222, 4)), ('matmul', (200, 4))]

(the forward's pad and product, the cotangent padded to the grid and its rows padded by the
22 rows of the offsets, and the input gradient's product: no pad per offset)
"""

from __future__ import annotations

from collections import Counter

from pypto.core.passes import ir_pass
from pypto.graph.ir import AVal, Eqn, Func, Var
from pypto.graph.passes.util import finish, subst

__all__ = ["shifted_sums"]


def _leaves(root: Eqn, producer: dict[Var, Eqn], uses: Counter[Var]) -> list[Eqn] | None:
    """The pads a tree of additions sums (each inner addition and pad used only there)."""
    out: list[Eqn] = []
    todo = list(root.inputs)
    while todo:
        a = todo.pop()
        e = producer.get(a) if isinstance(a, Var) else None
        if e is None or uses[e.out] != 1 or e.out.aval != root.out.aval:
            return None
        if e.op == "add":
            todo += e.inputs
        elif e.op == "lax_pad":
            out.append(e)
        else:
            return None
    return out


def _rewrite(
    root: Eqn, producer: dict[Var, Eqn], uses: Counter[Var]
) -> tuple[list[Eqn], Var] | None:
    """The equations that replace ``root`` (the last addition of such a sum), or None."""
    if root.out.aval.ndim != 2:
        return None
    pads = _leaves(root, producer, uses)
    if pads is None or len(pads) < 2:
        return None
    n_rows, width = root.out.aval.shape
    parts: list[tuple[int, int]] = []  # (rows down, first column of P)
    source: Var | None = None
    for p in pads:
        (lo, _, mid), cols = p.kwargs["config"]
        q = producer.get(p.inputs[0]) if isinstance(p.inputs[0], Var) else None
        if mid or cols != (0, 0, 0) or p.kwargs.get("value", 0) or q is None:
            return None
        if q.op != "slice" or uses[q.out] != 1 or not isinstance(q.inputs[0], Var):
            return None
        (r0, r1, rs), (c0, c1, cs) = q.kwargs["index"]
        src = q.inputs[0]
        if source is not None and src is not source:
            return None
        source = src
        if rs != 1 or cs != 1 or (r0, r1) != (0, src.aval.shape[0]) or c1 - c0 != width:
            return None
        parts.append((lo, c0))
    assert source is not None
    prod = producer.get(source)
    if prod is None or prod.op != "matmul" or uses[source] != len(parts):
        return None
    g, b = prod.inputs
    if not (isinstance(g, Var) and isinstance(b, Var)) or g.aval.ndim != 2 or b.aval.ndim != 2:
        return None
    rows, o = g.aval.shape
    if sorted(c for _, c in parts) != list(range(0, source.aval.shape[1], width)):
        return None
    d = source.aval.dtype
    top = max(lo for lo, _ in parts)
    made: list[Eqn] = []

    def emit(op: str, inputs: tuple[Var, ...], params: dict[str, object], aval: AVal) -> Var:
        v = Var(aval)
        made.append(Eqn(op, inputs, tuple(params.items()), v, root.loc, root.group, root.hint))
        return v

    # the parts in the order of P's columns, so B's blocks are its column blocks stacked:
    # [O, T·C] -> [O, T, C] -> [T, O, C] -> [T·O, C], views and one transpose
    order = sorted(parts, key=lambda t: t[1])
    n_parts = len(order)
    b3 = emit(
        "reshape", (b,), {"shape": (o, n_parts, width)}, AVal((o, n_parts, width), b.aval.dtype)
    )
    bt = emit("transpose", (b3,), {"perm": (1, 0, 2)}, AVal((n_parts, o, width), b.aval.dtype))
    bb = emit(
        "reshape", (bt,), {"shape": (n_parts * o, width)}, AVal((n_parts * o, width), b.aval.dtype)
    )
    gp = g
    if top or n_rows > rows:
        cfg = ((top, n_rows - rows, 0), (0, 0, 0))
        gp = emit("lax_pad", (g,), {"config": cfg}, AVal((top + n_rows, o), g.aval.dtype))
    a_parts = [
        emit(
            "slice",
            (gp,),
            {"index": ((top - lo, top - lo + n_rows, 1), (0, o, 1))},
            AVal((n_rows, o), g.aval.dtype),
        )
        for lo, _ in order
    ]
    a = emit("concat", tuple(a_parts), {"axis": 1}, AVal((n_rows, o * n_parts), g.aval.dtype))
    out = emit("matmul", (a, bb), {}, AVal((n_rows, width), d))
    return made, out


@ir_pass("shifted_sums")
def shifted_sums(f: Func) -> Func:
    """Sums of row-shifted zero-paddings of a product's column parts → one product over
    shifted rows (the module docstring). The replaced equations are left for ``dce``."""
    producer = {e.out: e for e in f.eqns}
    uses: Counter[Var] = Counter(a for e in f.eqns for a in e.inputs if isinstance(a, Var))
    uses.update(o for o in f.outputs if isinstance(o, Var))
    eqns: list[Eqn] = []
    sub: dict[Var, Var] = {}
    for e in f.eqns:
        e = subst(e, sub)  # type: ignore[arg-type]
        hit = _rewrite(e, producer, uses) if e.op == "add" else None
        if hit is None:
            eqns.append(e)
            continue
        made, out = hit
        eqns += made
        sub[e.out] = out
    return finish(f, eqns, sub) if sub else f  # type: ignore[arg-type]
