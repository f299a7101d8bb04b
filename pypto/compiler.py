"""The driver: ``jit``, ``make_graph`` and lowering — the only module that chains the levels.

The chain is trace → tensor passes (simplify, fuse) → Tile IR (one kernel per fusion group)
→ Block IR (cores, buffers, flags) → PTO ISA (one program per function) → the simulated NPU.
``backend="interpret"`` stops after the tensor passes and runs the Tensor IR on numpy.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pypto import dtypes as dt
from pypto.core import dispatch, progress
from pypto.core.errors import PyptoError, TraceError
from pypto.core.gcpause import gc_paused
from pypto.core.passes import Pass, PassManager, Snapshot, verify_default
from pypto.eager.tensor import Tensor, _wrap
from pypto.graph import interpret, passes, pytree
from pypto.graph.ir import Func
from pypto.graph.prints import PrintPlan, extract
from pypto.graph.tracer import ShapeDtypeStruct, Spec, Tracer, leaf_names, trace
from pypto.ops import api
from pypto.ops.debug_print import DEBUG_PRINT
from pypto.ops.table import Value

if TYPE_CHECKING:
    from pypto.block.ir import BlockFunc
    from pypto.isa.ir import Program
    from pypto.npu.machine import Machine
    from pypto.npu.profile import Profile
    from pypto.tile.ir import TileFunc

BACKENDS = ("interpret", "npu")


@dataclass(frozen=True)
class CacheInfo:
    """Compile-cache statistics of a jitted function."""

    hits: int
    misses: int
    size: int

    @property
    def traces(self) -> int:
        return self.misses

    def __str__(self) -> str:
        return f"CacheInfo(hits={self.hits}, traces={self.misses}, size={self.size})"


@dataclass(frozen=True, repr=False)
class Lowered:
    """A function lowered for one signature: its IR at every level.

    ``traced`` is the Tensor IR straight from tracing, ``tensor_ir`` after the tensor passes,
    ``snapshots`` the before/after text of every pass; ``tile_ir``, ``block_ir`` and ``isa``
    are the lower levels for ``machine`` (built on first access for the interpret backend).
    """

    traced: Func
    tensor_ir: Func
    in_tree: pytree.TreeDef
    out_tree: pytree.TreeDef
    static_key: tuple[Any, ...]
    backend: str
    snapshots: tuple[Snapshot, ...] = field(default=())
    machine: Any = "ascend910b"
    tile: Any = None
    fuse: bool = True
    _levels: dict[str, Any] = field(default_factory=dict, compare=False)
    # pto.debug.print calls, moved out of the program: their values are its last outputs
    prints: tuple[PrintPlan, ...] = ()

    def _build_levels(self, step: Callable[[str], None] | None = None) -> None:
        if self._levels:
            return
        with gc_paused():
            self._lower_levels(step)

    def _lower_levels(self, step: Callable[[str], None] | None) -> None:
        from pypto.block import codegen, schedule
        from pypto.npu.machine import machine as get_machine
        from pypto.tile import config, lower_func

        step = step or (lambda name: None)
        m = get_machine(self.machine)
        cfg = config.current().merged(config.parse(self.tile))
        step("tile")
        tf = lower_func(self.tensor_ir, m, cfg, fuse=self.fuse)
        step("block")
        bf = schedule(tf, m, double_buffer=cfg.double_buffer is not False)
        step("isa")
        prog = codegen(bf)
        if verify_default():
            tf.verify()
            bf.verify(m)
            prog.verify(m)
        self._levels.update(machine=m, tile_ir=tf, block_ir=bf, isa=prog)

    @property
    def tile_ir(self) -> TileFunc:
        """The Tile IR: one kernel per fusion group, tiles in named memory spaces."""
        self._build_levels()
        return self._levels["tile_ir"]

    @property
    def block_ir(self) -> BlockFunc:
        """The Block IR: per-core programs, allocated buffers, flags."""
        self._build_levels()
        return self._levels["block_ir"]

    @property
    def isa(self) -> Program:
        """The PTO program (``str()`` is its text assembly)."""
        self._build_levels()
        return self._levels["isa"]

    @property
    def target(self) -> Machine:
        self._build_levels()
        return self._levels["machine"]

    def compile(self) -> Compiled:
        if self.backend == "npu":
            self._build_levels()
        return Compiled(self)

    def __str__(self) -> str:
        return str(self.tensor_ir)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        from pypto.core.display import pre, section

        parts = [section("Tensor IR", pre(str(self.tensor_ir)), open_=True)]
        if self.backend == "npu" or self._levels:
            try:
                levels = [
                    ("Tile IR", self.tile_ir),
                    ("Block IR", self.block_ir),
                    ("PTO ISA", self.isa),
                ]
            except PyptoError as e:  # a level that cannot be built says why
                parts.append(section("lower levels", pre(str(e))))
            else:
                parts.extend(section(name, pre(str(ir))) for name, ir in levels)
        return "".join(parts)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}


@dataclass(frozen=True)
class Compiled:
    """An executable for one signature; calling it with another structure is an error."""

    lowered: Lowered

    def __call__(self, *args: Any) -> Any:
        leaves, tree = pytree.flatten(tuple(args))
        lw = self.lowered
        if tree != lw.in_tree:
            raise TraceError(
                f"called with argument structure {tree}, but compiled for {lw.in_tree}",
                op="jit",
                hint="call the jitted function itself to retrace for a new structure",
            )
        dyn = [x for x in leaves if not _is_py_scalar(x)]
        params = lw.tensor_ir.params
        for i, (x, p) in enumerate(zip(dyn, params, strict=False)):
            v = api.asvalue(x, "jit")
            if tuple(v.shape) != p.aval.shape or v.dtype is not p.aval.dtype:  # type: ignore[attr-defined]
                raise TraceError(
                    f"argument leaf {i} is {v.dtype.short}{list(v.shape)} but this executable "  # type: ignore[attr-defined]
                    f"was compiled for {p.aval}",
                    op="jit",
                    hint="call the jitted function itself to compile for new shapes",
                )
        return _execute(lw, dyn)


def _is_py_scalar(x: Any) -> bool:
    return type(x) in (bool, int, float)


def _leaf_key(x: Any) -> Any:
    # Python scalars are baked into the trace (their weak typing then matches eager mode).
    if _is_py_scalar(x):
        return ("py", type(x).__name__, x)
    if isinstance(x, Value):
        return (tuple(x.shape), x.dtype)  # type: ignore[attr-defined]
    a = api.to_numpy(x, "jit")
    return (a.shape, dt.from_numpy(a.dtype))


def _execute(lw: Lowered, dyn: Sequence[Any]) -> Any:
    func = lw.tensor_ir
    if any(isinstance(x, Tracer) for x in dyn):
        vals = [api.asvalue(x) for x in dyn]
        outs = interpret.evaluate(func, vals)  # inside another trace: inline
        return _printed(lw, list(outs), traced=True)
    arrays = [x._a if type(x) is Tensor else api.to_numpy(x, "jit") for x in dyn]
    if lw.backend == "npu" and not _empty(func) and lw.tile_ir.kernels:
        prof = simulate_lowered(lw, arrays, numerics=True, trace=False)
        assert prof.outputs is not None
        return _printed(lw, list(prof.outputs))
    return _printed(lw, [_wrap(a) for a in interpret.run(func, arrays)])


def _printed(lw: Lowered, outs: list[Any], traced: bool = False) -> Any:
    """The function's results from the program's outputs, after printing the values of its
    ``pto.debug.print`` calls (its last outputs) in order; inside another trace the prints
    are that trace's again."""
    n = sum(p.count for p in lw.prints)
    extra = outs[len(outs) - n :]
    for p in lw.prints:
        vals, extra = extra[: p.count], extra[p.count :]
        if traced:
            params = {"fmt": p.fmt, "keys": p.keys, "id": p.id}
            dispatch.bind(DEBUG_PRINT, tuple(api.asvalue(v) for v in p.filled(vals)), params)
        else:
            print(p.text([np.asarray(v) for v in vals]), flush=True)
    return pytree.unflatten(lw.out_tree, outs[: len(outs) - n])


def _empty(f: Func) -> bool:
    # A computation over a zero-size tensor has no tiles to run: it is all shape, no work.
    vals = (*f.params, *(v for v, _ in f.consts), *(e.out for e in f.eqns))
    return any(v.aval.size == 0 for v in vals)


def simulate_lowered(
    lw: Lowered, arrays: Sequence[Any], *, numerics: bool = True, trace: bool = True
) -> Profile:
    """Run the lowered program on its machine; the Profile's ``outputs`` are the function's
    results as Tensors (in output order), or None without numerics."""
    import dataclasses

    import numpy as np

    from pypto.npu import simulate

    prog, tf, m = lw.isa, lw.tile_ir, lw.target
    inputs: dict[str, Any] = {}
    if numerics:
        for name, a in zip(tf.params, arrays, strict=True):
            inputs[name] = np.asarray(a).reshape(tf.buffer(name).shape)
        for name, data in tf.consts:
            inputs[name] = data
    if not tf.kernels:
        raise PyptoError(
            f"@{tf.name} has no kernel to run: it only returns views of its inputs or constants",
            op="profile",
        )
    from pypto.npu.invariants import check_if_requested, requested

    with progress.counter(f"simulate {prog.name} on {m.name}", "cycle") as at:
        trace = trace or requested()
        prof = simulate(prog, m, inputs, numerics=numerics, trace=trace, progress=at)
    check_if_requested(prof)
    if not numerics:
        return prof
    got = prof.outputs or {}
    outs = []
    for name, shape in tf.outputs:
        a = got[name] if name in got else inputs[name]
        outs.append(_wrap(np.array(a).reshape(shape)))
    prof._cache["gm_outputs"] = got
    return dataclasses.replace(prof, outputs=outs)  # type: ignore[arg-type]


class Jitted:
    """A staged function: traced once per signature, optimized, and run on its backend."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        machine: Any = "ascend910b",
        tile: Any = None,
        static_argnums: int | Sequence[int] = (),
        backend: str = "npu",
        fuse: bool = True,
    ) -> None:
        if backend not in BACKENDS:
            raise PyptoError(
                f"unknown backend {backend!r}", op="jit", hint=f"use one of {BACKENDS}"
            )
        self.fn = fn
        self.machine = machine
        self.tile = tile
        self.static_argnums = (
            (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        )
        self.backend = backend
        self.fuse = fuse
        self._cache: dict[Any, Lowered] = {}
        self._hits = 0
        self._misses = 0
        functools.update_wrapper(self, fn)

    def _split(self, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        n = len(args)
        for s in self.static_argnums:
            if not -n <= s < n:
                raise TraceError(
                    f"static_argnums={self.static_argnums} but the call has {n} arguments",
                    op="jit",
                )
        static = {s % n for s in self.static_argnums}
        stat = tuple((i, args[i]) for i in sorted(static))
        for i, v in stat:
            try:
                hash(v)
            except TypeError:
                raise TraceError(
                    f"static argument {i} of type {type(v).__name__} is not hashable",
                    op="jit",
                    hint="static arguments key the compile cache; pass a tuple, not a list",
                ) from None
        dyn = tuple(a for i, a in enumerate(args) if i not in static)
        return stat, dyn

    def _key(self, stat: Any, dyn: tuple[Any, ...]) -> tuple[Any, ...]:
        leaves, tree = pytree.flatten(dyn)
        return (
            tree,
            tuple(_leaf_key(x) for x in leaves),
            stat,
            str(self.machine),
            repr(self.tile),
            self.fuse,
            self.backend,
        )

    def lower(self, *args: Any, snapshots: bool = False) -> Lowered:
        """Trace and optimize for these arguments (cached), without running."""
        stat, dyn = self._split(args)
        key = self._key(stat, dyn)
        hit = self._cache.get(key)
        if hit is not None and not snapshots:
            self._hits += 1
            return hit
        self._misses += 1
        lw = self._build(stat, dyn, snapshots)
        self._cache[key] = lw
        return lw

    def _build(self, stat: tuple[Any, ...], dyn: tuple[Any, ...], snapshots: bool) -> Lowered:
        static = dict(stat)
        n = len(stat) + len(dyn)

        def staged(*d: Any) -> Any:
            it = iter(d)
            full = [static[i] if i in static else next(it) for i in range(n)]
            return self.fn(*full)

        # Python scalars are static: bake them in, so they stay weakly typed as in eager mode.
        leaves, in_tree = pytree.flatten(dyn)
        scal = {i: x for i, x in enumerate(leaves) if _is_py_scalar(x)}

        def with_scalars(*dyn_leaves: Any) -> Any:
            it = iter(dyn_leaves)
            full = [scal[i] if i in scal else next(it) for i in range(len(leaves))]
            return staged(*pytree.unflatten(in_tree, full))

        # one name per leaf (``p_0``, ``p_1`` ... for a nested argument), scalars dropped
        names = [
            n for i, n in enumerate(leaf_names(in_tree, self._arg_names(stat))) if i not in scal
        ]
        fname = getattr(self.fn, "__name__", "f")
        levels = ["trace", "tensor passes"]
        if self.backend == "npu":
            levels += ["tile", "block", "isa"]
        with gc_paused(), progress.stages(f"compile {fname}", levels) as step:
            step("trace")
            func, out_tree, free = trace(
                with_scalars,
                [x for i, x in enumerate(leaves) if i not in scal],
                name=fname,
                arg_names=names,
            )
            return self._finish(func, in_tree, out_tree, free, stat, snapshots, step)

    def _finish(
        self,
        func: Func,
        in_tree: pytree.TreeDef,
        out_tree: pytree.TreeDef,
        free: Any,
        stat: tuple[Any, ...],
        snapshots: bool,
        step: Callable[[str], None],
    ) -> Lowered:
        if free:
            raise TraceError(
                "a jitted function closes over a traced value of an enclosing transform",
                op="jit",
                hint="pass the value as an argument instead",
            )
        step("tensor passes")
        pipeline: tuple[Pass, ...] = passes.DEFAULT if self.fuse else passes.UNFUSED
        snaps: list[Snapshot] = []
        opt = func
        if passes.has_calls(func):  # differentiated by now: custom_vjp bodies go inline
            opt, snaps = PassManager((passes.inline,), snapshots=snapshots).run(func)
        # the prints leave the program (their values are its last outputs), so the passes
        # and the lower levels see an ordinary one
        opt, prints = extract(opt)
        opt, more = PassManager(pipeline, snapshots=snapshots).run(opt)
        snaps = [*snaps, *more]
        lw = Lowered(
            func,
            opt,
            in_tree,
            out_tree,
            stat,
            self.backend,
            tuple(snaps),
            self.machine,
            self.tile,
            self.fuse,
            prints=prints,
        )
        if self.backend == "npu" and not _empty(opt):
            lw._build_levels(step)
        return lw

    def _arg_names(self, stat: tuple[Any, ...]) -> list[str] | None:
        try:
            sig = inspect.signature(self.fn)
        except (TypeError, ValueError):
            return None
        static = {i for i, _ in stat}
        ps = [
            p.name
            for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        return [p for i, p in enumerate(ps) if i not in static]

    def __call__(self, *args: Any) -> Any:
        if _JIT_DISABLED[-1]:
            return self.fn(*args)  # eagerly, line by line (pto.disable_jit)
        lw = self.lower(*args)
        _, dyn = self._split(args)
        leaves, _ = pytree.flatten(dyn)
        return _execute(lw, [x for x in leaves if not _is_py_scalar(x)])

    def profile(self, *args: Any, numerics: bool = True, trace: bool = True) -> Profile:
        """Compile for these arguments and run on the simulated NPU: the
        :class:`~pypto.npu.Profile` (cycles, roofline, utilization, trace ...). Its ``outputs``
        hold the results (in output order, then the values of the function's
        ``pto.debug.print`` calls, which ``profile`` does not print); ``numerics=False`` times
        the program without computing them (``outputs`` is None), for large sweeps."""
        lw = self.lower(*args)
        _, dyn = self._split(args)
        leaves, _ = pytree.flatten(dyn)
        arrays = [
            x._a if type(x) is Tensor else api.to_numpy(x, "jit")
            for x in leaves
            if not _is_py_scalar(x)
        ]
        if _empty(lw.tensor_ir):
            raise PyptoError("profile: the computation is over a zero-size tensor", op="profile")
        return simulate_lowered(lw, arrays, numerics=numerics, trace=trace)

    def cache_info(self) -> CacheInfo:
        """Hits and traces of the compile cache."""
        return CacheInfo(self._hits, self._misses, len(self._cache))

    def __repr__(self) -> str:
        return f"<pto.jit {getattr(self.fn, '__name__', 'f')} backend={self.backend}>"


def jit(
    fn: Callable[..., Any] | None = None,
    *,
    machine: Any = "ascend910b",
    tile: Any = None,
    static_argnums: int | Sequence[int] = (),
    backend: str = "npu",
    fuse: bool = True,
) -> Any:
    """Stage ``fn``: trace once per signature, optimize the graph, run it on the backend.

    ``backend="npu"`` (the default) compiles through the Tile IR, the Block IR and the PTO
    ISA and runs on the simulated ``machine``; ``backend="interpret"`` runs the Tensor IR on
    numpy. ``tile=dict(vec=..., cube=...)`` sets tile shapes for this function, and
    ``double_buffer=False`` / ``swizzle=G`` in the same dict the buffering and the order of
    matmul output tiles (see :mod:`pypto.tile.config`).

    >>> import pypto as pto
    >>> f = pto.jit(lambda x: pto.exp(x) + 1)
    >>> f(pto.zeros(3)).numpy()
    array([2., 2., 2.], dtype=float32)
    >>> print(f.cache_info())
    CacheInfo(hits=0, traces=1, size=1)
    """
    kw: dict[str, Any] = dict(
        machine=machine, tile=tile, static_argnums=static_argnums, backend=backend, fuse=fuse
    )
    if fn is None:
        return lambda f: Jitted(f, **kw)
    return Jitted(fn, **kw)


def make_graph(fn: Callable[..., Any], static_argnums: int | Sequence[int] = ()) -> Any:
    """``make_graph(fn)(*args)`` is the traced Tensor IR of ``fn``, like ``jax.make_jaxpr``.

    >>> import pypto as pto
    >>> print(pto.make_graph(lambda x: pto.exp(x) * 2)(pto.ones((2,))))  # doctest: +ELLIPSIS
    func @lambda(%x: f32[2]) -> (f32[2]) {
      %0: f32[2] = exp %x ...
      %1: f32[2] = mul %0, 2.0:f32 ...
      return %1
    }
    """

    def graph(*args: Any) -> Func:
        j = Jitted(fn, static_argnums=static_argnums)
        stat, dyn = j._split(args)
        static = dict(stat)
        n = len(args)

        def staged(*d: Any) -> Any:
            it = iter(d)
            return fn(*[static[i] if i in static else next(it) for i in range(n)])

        func, _, _ = trace(
            staged, dyn, name=getattr(fn, "__name__", "f"), arg_names=j._arg_names(stat)
        )
        return func

    return graph


_JIT_DISABLED = [False]


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Inside, jitted functions run their Python eagerly, op by op, as under
    ``jax.disable_jit``: a breakpoint or a ``print`` in them sees concrete values, and an
    error stops at its op. ``disable=False`` turns it back on in a nested block.

    >>> import pypto as pto
    >>> @pto.jit
    ... def f(x):
    ...     print(type(x).__name__)
    ...     return x + 1
    >>> with pto.disable_jit():
    ...     _ = f(pto.ones(2))
    Tensor
    """
    _JIT_DISABLED.append(disable)
    try:
        yield
    finally:
        _JIT_DISABLED.pop()


def block_until_ready(x: Any) -> Any:
    """``x``, as ``jax.block_until_ready``: pypto computes synchronously, so its results
    are ready when they are returned."""
    return x


def device_get(x: Any) -> Any:
    """The tensors of the pytree ``x`` as numpy arrays, as ``jax.device_get``.

    >>> import pypto as pto
    >>> pto.device_get({"w": pto.ones(2)})
    {'w': array([1., 1.], dtype=float32)}
    """
    return pytree.tree_map(lambda v: np.asarray(v) if isinstance(v, Value) else v, x)


def eval_shape(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes ``fn(*args, **kwargs)`` would return, as ``jax.eval_shape``:
    ``fn`` is traced, nothing runs. Arguments may be tensors, arrays, numbers or
    :class:`ShapeDtypeStruct` stand-ins (JAX's too), in any pytree.

    >>> import pypto as pto
    >>> x = pto.ShapeDtypeStruct((8, 1024), pto.float16)
    >>> out = pto.eval_shape(lambda x, w: {"y": x @ w, "n": (x @ w).sum(0)}, x, pto.ones((1024, 4)))
    >>> out["y"], out["n"]
    (ShapeDtypeStruct(shape=(8, 4), dtype=float32), ShapeDtypeStruct(shape=(4,), dtype=float32))
    """
    leaves, tree = pytree.flatten((args, kwargs))
    specs = [_spec_of(x) for x in leaves]

    def staged(*xs: Any) -> Any:
        a, k = pytree.unflatten(tree, xs)
        return fn(*a, **k)

    func, out_tree, _ = trace(staged, specs, name=getattr(fn, "__name__", "f"))
    outs = [ShapeDtypeStruct(o.aval.shape, o.aval.dtype) for o in func.outputs]
    return pytree.unflatten(out_tree, outs)


def _spec_of(x: Any) -> Any:
    """An abstract stand-in for a leaf with a shape and a dtype (a JAX one included)."""
    if isinstance(x, Spec | bool | int | float):
        return x
    shape, d = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is not None and d is not None:
        return ShapeDtypeStruct(shape, d if isinstance(d, dt.DType) else dt.from_numpy(d))
    return x


__all__ = [
    "CacheInfo",
    "Compiled",
    "Jitted",
    "Lowered",
    "ShapeDtypeStruct",
    "block_until_ready",
    "device_get",
    "disable_jit",
    "eval_shape",
    "jit",
    "make_graph",
]
