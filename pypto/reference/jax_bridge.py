"""The same computation in JAX: ``to_jax`` and the numerics check ``check``.

``to_jax(fn)`` traces ``fn`` to the Tensor IR and evaluates each equation with its op's JAX
reference, so the JAX function computes exactly what pypto computes, op for op.
"""

from __future__ import annotations

import html
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import NumericsMismatch
from pypto.core.tolerance import coarser
from pypto.graph import pytree
from pypto.graph.ir import Atom, Func, Lit, Var
from pypto.graph.passes import inline
from pypto.graph.tracer import Spec, trace
from pypto.ops import api
from pypto.ops.table import OPS, AVal
from pypto.reference.compare import Comparison, compare


def eval_jax(func: Func, args: Sequence[Any]) -> list[Any]:
    """Evaluate ``func`` with the JAX reference of every op."""
    env: dict[Var, Any] = dict(zip(func.params, args, strict=True))
    for v, arr in func.consts:
        env[v] = jnp.asarray(arr)

    def read(a: Atom) -> Any:
        return jnp.asarray(a.value) if isinstance(a, Lit) else env[a]

    for e in func.eqns:
        env[e.out] = OPS[e.op].jax_impl(*(read(a) for a in e.inputs), **e.kwargs)  # type: ignore[misc]
    return [read(o) for o in func.outputs]


def to_jax(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a JAX function (traced per call signature; arrays in, JAX arrays out).

    >>> import pypto as pto, jax.numpy as jnp
    >>> f = pto.to_jax(lambda x: pto.softmax(x) * 2)
    >>> f(jnp.zeros(4)).tolist()
    [0.5, 0.5, 0.5, 0.5]
    """

    def jfn(*args: Any) -> Any:
        # Trace from shapes and dtypes only, so this also works on JAX tracers (under jax.jit);
        # Python scalars are baked in, weakly typed, as jit does.
        leaves, tree = pytree.flatten(tuple(args))
        scalar = [isinstance(x, bool | int | float) for x in leaves]
        arrays = [x for x, s in zip(leaves, scalar, strict=True) if not s]

        def staged(*dyn: Any) -> Any:
            it = iter(dyn)
            full = [x if s else next(it) for x, s in zip(leaves, scalar, strict=True)]
            return fn(*pytree.unflatten(tree, full))

        specs = [Spec(AVal(tuple(np.shape(x)), _dtype(x))) for x in arrays]
        func, out_tree, _ = trace(staged, specs, name=getattr(fn, "__name__", "f"))
        return pytree.unflatten(out_tree, eval_jax(func, [jnp.asarray(x) for x in arrays]))

    jfn.__name__ = f"jax_{getattr(fn, '__name__', 'f')}"
    return jfn


def _dtype(x: Any) -> dt.DType:
    d = getattr(x, "dtype", None)
    if d is None:
        return dt.from_numpy(api.to_numpy(x).dtype)
    return d if isinstance(d, dt.DType) else dt.from_numpy(np.dtype(d))


def sum_lengths(func: Func) -> list[int]:
    """Per output, the K of the tolerance table: the summed lengths of the reductions and
    matmul contractions along its longest dependency chain (relative rounding errors of chained
    reductions add up; they do not multiply)."""
    func = inline(func)  # the sums inside custom_vjp bodies count too
    k: dict[Var, int] = {}
    for e in func.eqns:
        kin = max((k.get(a, 1) for a in e.inputs if isinstance(a, Var)), default=1)
        if e.op == "sum":
            shape = e.inputs[0].aval.shape
            kin += int(np.prod([shape[a] for a in e.kwargs["axes"]]))
        elif e.op == "matmul":
            kin += e.inputs[0].aval.shape[-1]
        elif e.op == "kernel_call":  # opaque: it may sum along any operand's last axis
            kin += sum(a.aval.shape[-1] for a in e.inputs if a.aval.ndim)
        k[e.out] = kin
    return [k.get(o, 1) if isinstance(o, Var) else 1 for o in func.outputs]


def precisions(func: Func) -> list[dt.DType]:
    """Per output, the least precise float dtype that a value on its dependency chain was
    rounded to (the output's own dtype if none is coarser): the dtype whose tolerance it gets.
    ``(a @ b).astype(float32)`` of float16 operands was rounded to float16 by the product, so
    its summation order shows at float16's precision, not float32's. Inputs round nothing.

    >>> import pypto as pto
    >>> from pypto.graph.tracer import trace
    >>> f16 = pto.ones((4, 8), pto.float16)
    >>> func, _, _ = trace(lambda a: ((a @ a.T).astype(pto.float32), a.astype(pto.float32)), [f16])
    >>> [d.name for d in precisions(func)]
    ['float16', 'float32']
    """
    func = inline(func)
    coarse: dict[Var, dt.DType] = {}
    for e in func.eqns:
        d = e.out.aval.dtype
        for a in e.inputs:
            if isinstance(a, Var) and a in coarse:
                d = coarser(coarse[a], d) if d.is_floating else coarse[a]
        coarse[e.out] = d
    return [
        coarser(coarse.get(o, o.aval.dtype), o.aval.dtype) if isinstance(o, Var) else dt.float32
        for o in func.outputs
    ]


@dataclass(frozen=True, repr=False)
class CheckReport:
    """Every output of every backend compared with JAX."""

    name: str
    rows: tuple[tuple[str, Comparison], ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for _, c in self.rows)

    def __str__(self) -> str:
        lines = [f"check {self.name}: " + ("all outputs match JAX" if self.ok else "MISMATCH")]
        lines += [f"  {backend:<10} {c}" for backend, c in self.rows]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr style='color:{'#070' if c.ok else '#c00'}'><td>{html.escape(b)}</td>"
            f"<td>{html.escape(c.name)}</td><td>{c.dtype.short}{list(c.shape)}</td>"
            f"<td>{c.max_abs:.3g}</td><td>{c.max_rel:.3g}</td><td>{c.rtol:.3g}</td>"
            f"<td>{'ok' if c.ok else 'FAIL'}</td></tr>"
            for b, c in self.rows
        )
        return (
            f"<b>check {html.escape(self.name)}</b><table><tr><th>backend</th><th>output</th>"
            f"<th>type</th><th>max |Δ|</th><th>max rel</th><th>rtol</th><th></th></tr>"
            f"{rows}</table>"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}


def _in_ipython() -> bool:
    """Whether an IPython shell (a notebook kernel or the terminal) is running this code."""
    ipy = sys.modules.get("IPython")
    return ipy is not None and getattr(ipy, "get_ipython", lambda: None)() is not None


def check(
    fn: Callable[..., Any],
    *args: Any,
    backends: Sequence[str] = ("eager", "interpret", "npu"),
    verbose: bool | None = None,
    machine: Any = "tiny",
) -> CheckReport:
    """Run ``fn`` eagerly, through ``jit(backend="interpret")`` and compiled for the simulated
    NPU (``machine``, by default the one-cluster ``tiny``), and compare each with JAX.

    Returns the per-output report (a table in notebooks) and raises
    :class:`pypto.NumericsMismatch` on failure. ``verbose`` prints the report too; by default
    it does so outside IPython only, where the returned report does not show itself (inside,
    printing it as well would show it twice).

    >>> import pypto as pto
    >>> r = pto.check(lambda x: pto.gelu(x).sum(), pto.ones((4, 4)), verbose=False)
    >>> r.ok
    True
    """
    from pypto.compiler import jit

    func, _, _ = trace(fn, args)
    ref = eval_jax(func, [jnp.asarray(np.asarray(x)) for x in pytree.flatten(tuple(args))[0]])
    ks, ps = sum_lengths(func), precisions(func)
    runs: dict[str, Any] = {}
    if "eager" in backends:
        runs["eager"] = fn(*args)
    if "interpret" in backends:
        runs["interpret"] = jit(fn, backend="interpret")(*args)
    if "npu" in backends:
        runs["npu"] = jit(fn, backend="npu", machine=machine)(*args)
    rows = []
    for backend, out in runs.items():
        leaves, _ = pytree.flatten(out)
        for i, (a, r, k, p) in enumerate(zip(leaves, ref, ks, ps, strict=True)):
            c = compare(f"out[{i}]", api.asvalue(a), np.asarray(r), k, precision=p)
            rows.append((backend, c))
    name = getattr(fn, "__name__", "f")
    report = CheckReport(name, tuple(rows))
    if verbose or (verbose is None and not _in_ipython()):
        print(report)
    if not report.ok:
        raise NumericsMismatch(str(report), op="check")
    return report
