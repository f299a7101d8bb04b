"""Fusion grouping: partition the equations into kernels (shown as ``group`` blocks).

Rules, applied in program order:

- an elementwise equation joins the kernel that produced its operand of the same shape, when
  that is the latest kernel among its operands (so kernels stay acyclic): chains of elementwise
  ops fuse together and into the epilogue of a preceding matmul, reduction or normalization
  — unless a ``pto.hint`` of the equation sets a key the kernel's hint sets otherwise (an op
  hinted differently starts a kernel of its own; an unhinted op takes the kernel's hint);
- softmax, log_softmax, layer_norm and rms_norm (traced composites) are one kernel each;
- matmul → (scale, bias, mask) → softmax → matmul becomes one ``attention`` kernel;
- matmuls, reductions and layout ops otherwise start kernels of their own.

:func:`unfuse` is the op-by-op baseline: every equation its own kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pypto.core.passes import ir_pass
from pypto.graph.ir import Eqn, Func, Var
from pypto.ops.table import OPS

# Composites traced as one region that become one kernel each, with the kernel's kind.
REGION_KERNELS = {
    "softmax": "norm",
    "log_softmax": "norm",
    "layer_norm": "norm",
    "rms_norm": "norm",
    "scaled_dot_product_attention": "attention",
}
FUSES_EPILOGUE = ("elementwise", "matmul", "reduce", "norm", "attention")


@dataclass
class _Kernel:
    kind: str  # "elementwise", "matmul", "reduce", "norm", "layout", "attention"
    parts: list[str]  # names for the kernel: ops and composites in order
    shape: tuple[int, ...]  # the shape its epilogue works on
    eqns: list[int] = field(default_factory=list)
    region: str | None = None
    hint: dict[str, Any] = field(default_factory=dict)  # the pto.hint of its equations


def _agrees(kernel: dict[str, Any], hint: tuple[tuple[str, Any], ...]) -> bool:
    return all(kernel.get(k, v) == v for k, v in hint)


def _name(parts: list[str]) -> str:
    out: list[str] = []
    for p in parts:
        if not out or out[-1] != p:
            out.append(p)
    if len(out) > 5:
        out = [*out[:4], "etc"]
    return "_".join(out)


def _kernels(f: Func) -> tuple[list[_Kernel], dict[Var, int]]:
    kernels: list[_Kernel] = []
    kernel_of: dict[Var, int] = {}
    region_kind = dict(f.groups)
    open_region: dict[str, int] = {}
    for i, e in enumerate(f.eqns):
        kind = OPS[e.op].kind
        src = [kernel_of[a] for a in e.inputs if isinstance(a, Var) and a in kernel_of]
        comp = region_kind.get(e.group) if e.group else None
        if comp in REGION_KERNELS:
            assert e.group is not None
            k = open_region.get(e.group)
            if k is None:
                k = len(kernels)
                name = "attention" if comp == "scaled_dot_product_attention" else comp
                kernels.append(
                    _Kernel(REGION_KERNELS[comp], [name], e.out.aval.shape, region=e.group)
                )
                open_region[e.group] = k
            kernels[k].eqns.append(i)
            kernels[k].hint.update(e.hint)
            kernels[k].shape = e.out.aval.shape
            kernel_of[e.out] = k
            continue
        if kind == "elementwise" and src:
            last = max(src)
            kl = kernels[last]
            same = any(
                isinstance(a, Var) and kernel_of.get(a) == last and a.aval.shape == e.out.aval.shape
                for a in e.inputs
            )
            if (
                kl.kind in FUSES_EPILOGUE
                and same
                and kl.shape == e.out.aval.shape
                and _agrees(kl.hint, e.hint)
            ):
                kl.eqns.append(i)
                kl.hint.update(e.hint)
                kl.parts.append(comp or e.op)
                kernel_of[e.out] = last
                continue
        kk = kind if kind in ("elementwise", "matmul", "reduce") else "layout"
        kernels.append(_Kernel(kk, [comp or e.op], e.out.aval.shape, [i], hint=dict(e.hint)))
        kernel_of[e.out] = len(kernels) - 1
    return kernels, kernel_of


def _merge_attention(f: Func, kernels: list[_Kernel], kernel_of: dict[Var, int]) -> None:
    """Merge consecutive matmul → softmax → matmul kernels whose values flow only forward."""
    users: dict[int, set[int]] = {}
    for i, e in enumerate(f.eqns):
        for a in e.inputs:
            if isinstance(a, Var) and a in kernel_of:
                users.setdefault(kernel_of[a], set()).add(kernel_of[f.eqns[i].out])
    outs = {kernel_of[o] for o in f.outputs if isinstance(o, Var) and o in kernel_of}
    i = 0
    while i + 2 < len(kernels):
        m, s, n = kernels[i], kernels[i + 1], kernels[i + 2]
        if (
            m.kind == "matmul"
            and s.kind == "norm"
            and s.parts == ["softmax"]
            and n.kind == "matmul"
            and n.parts[0] == "matmul"
            and users.get(i, set()) <= {i, i + 1}
            and users.get(i + 1, set()) <= {i + 1, i + 2}
            and i not in outs
            and i + 1 not in outs
        ):
            eqns = m.eqns + s.eqns + n.eqns
            lo = i
            t = _keys_transpose(f, kernels, kernel_of, users, outs, i)
            if t is not None:  # kᵀ's own transpose joins: the kernel reads k's tiles in place
                eqns = kernels[t].eqns + eqns
                kernels.insert(i - 1, kernels.pop(t))  # (just before the matmul)
                for v, k in list(kernel_of.items()):
                    kernel_of[v] = i - 1 if k == t else (k - 1 if t < k < i else k)
                lo = i - 1
            kernels[lo : i + 3] = [_Kernel("attention", ["attention"], n.shape, eqns)]
            for v, k in list(kernel_of.items()):
                kernel_of[v] = lo if lo <= k <= i + 2 else (k - (i + 2 - lo) if k > i + 2 else k)
            i = lo
            users = {}
            for j, e in enumerate(f.eqns):
                for a in e.inputs:
                    if isinstance(a, Var) and a in kernel_of:
                        users.setdefault(kernel_of[a], set()).add(kernel_of[f.eqns[j].out])
            outs = {kernel_of[o] for o in f.outputs if isinstance(o, Var) and o in kernel_of}
        i += 1


def _keys_transpose(
    f: Func,
    kernels: list[_Kernel],
    kernel_of: dict[Var, int],
    users: dict[int, set[int]],
    outs: set[int],
    i: int,
) -> int | None:
    """The earlier kernel that is only the transpose making kᵀ for the matmul kernel ``i``
    (``q @ kᵀ``, with k's last axis moved next to last), used by nothing else; or None."""
    kt = f.eqns[kernels[i].eqns[0]].inputs[1]
    t = kernel_of.get(kt) if isinstance(kt, Var) else None
    if t is None or t >= i or t in outs or users.get(t) != {i} or len(kernels[t].eqns) != 1:
        return None
    e = f.eqns[kernels[t].eqns[0]]
    perm: tuple[int, ...] = tuple(e.kwargs.get("perm", ())) if e.op == "transpose" else ()
    return t if len(perm) >= 2 and perm[-2] == len(perm) - 1 else None


def _recompute_epilogues(f: Func, kernels: list[_Kernel], kernel_of: dict[Var, int]) -> None:
    """Move a matmul's elementwise epilogue op into the one later row kernel (reduction or
    elementwise) that reads its result, when the product leaves the matmul's kernel anyway for
    that kernel or a later one: the op is then computed where it is used, from the product the
    row kernels load (the Tile level merges consecutive row kernels over the same rows),
    instead of the matmul storing a second full-size result to be read back. A softmax's
    backward is the case: it reads the matmul's ``dP`` and sums ``dP · P`` along its rows."""
    users: dict[Var, set[int]] = {}
    for i, e in enumerate(f.eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                users.setdefault(a, set()).add(i)
    outs = {o for o in f.outputs if isinstance(o, Var)}
    for k, kern in enumerate(kernels):
        if kern.kind != "matmul" or kern.region is not None:
            continue
        prod = f.eqns[kern.eqns[0]]
        if prod.op != "matmul":
            continue
        a = prod.out
        if a not in outs and all(kernel_of[f.eqns[u].out] == k for u in users.get(a, ())):
            continue  # the product stays in the kernel: its epilogue costs no extra store
        for i in reversed(kern.eqns[1:]):
            e = f.eqns[i]
            if OPS[e.op].kind != "elementwise" or e.out in outs:
                continue
            if any(isinstance(x, Var) and kernel_of.get(x) == k and x != a for x in e.inputs):
                continue
            there = {kernel_of[f.eqns[u].out] for u in users.get(e.out, ())}
            if len(there) != 1 or k in there:
                continue
            c = there.pop()
            later = {kernel_of[f.eqns[u].out] for u in users.get(a, ())} - {k}
            kc = kernels[c]
            if (
                kc.kind not in ("reduce", "elementwise")
                or not any(x >= c for x in later)
                or not _agrees(kc.hint, e.hint)
            ):
                continue
            at = kern.eqns.index(i)  # (parts name the eqns of a kernel not from a region)
            kern.eqns.pop(at)
            kc.eqns.insert(0, i)
            kc.parts.insert(0, kern.parts.pop(at))
            kc.hint.update(e.hint)
            kern.hint = {k_: v for j in kern.eqns for k_, v in f.eqns[j].hint}
            kernel_of[e.out] = c


def _assign(f: Func, kernels: list[_Kernel]) -> Func:
    order: list[Eqn] = []
    groups = []
    for k, kern in enumerate(kernels):
        gid = f"k{k}"
        groups.append((gid, _name(kern.parts)))
        order.extend(replace(f.eqns[i], group=gid) for i in sorted(kern.eqns))
    return f.replace(eqns=tuple(order), groups=tuple(groups))


@ir_pass("fuse")
def fuse(f: Func) -> Func:
    kernels, kernel_of = _kernels(f)
    _merge_attention(f, kernels, kernel_of)
    _recompute_epilogues(f, kernels, kernel_of)
    return _assign(f, kernels)


@ir_pass("unfuse")
def unfuse(f: Func) -> Func:
    kernels = [_Kernel(OPS[e.op].kind, [e.op], e.out.aval.shape, [i]) for i, e in enumerate(f.eqns)]
    return _assign(f, kernels)
