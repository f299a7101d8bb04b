"""``pto.checkpoint`` (``pto.remat``): recompute a function's intermediate values in the
backward pass instead of keeping them from the forward one, as ``jax.checkpoint``.

A checkpointed function traced inside a transform is one call (``custom_vjp_call`` equations
naming it, as a ``pto.custom_vjp``'s are), so autodiff applies its VJP rule rather than
differentiating its body. The rule replays the body on the inputs passed through
``optimization_barrier``, which CSE does not see through, so the replay is not merged with the
forward values; the values the ``policy`` saves come from the forward pass instead. It then
walks the body backward over the replayed values. Under ``jit`` the forward pass thus keeps
only the inputs and the saved values for the backward one, and the tensor passes drop the
barriers after CSE, so the recomputation fuses with the backward's own ops.

A policy is ``policy(op, *avals, **params) -> bool``, JAX's signature with the op's name in
place of the primitive: whether the output of an equation of the body is saved.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

from pypto.core import dispatch
from pypto.core.errors import PyptoError, TraceError
from pypto.graph import autodiff, interpret, pytree
from pypto.graph.batching import vmap
from pypto.graph.custom_vjp import Named, custom_vjp
from pypto.graph.ir import Eqn, Func, Var
from pypto.graph.tracer import trace
from pypto.ops import api
from pypto.ops.table import AVal, Value

__all__ = [
    "checkpoint",
    "checkpoint_name",
    "checkpoint_policies",
    "print_saved_residuals",
    "remat",
    "saved_residuals",
]

Policy = Callable[..., bool]
checkpoint_name = api.checkpoint_name


# ---------------------------------------------------------------- policies


def everything_saveable(op: str, *avals: AVal, **params: Any) -> bool:
    """Save every value: nothing is recomputed (as without ``checkpoint``)."""
    return True


def nothing_saveable(op: str, *avals: AVal, **params: Any) -> bool:
    """Save nothing but the inputs: the whole body is recomputed (the default)."""
    return False


def dots_saveable(op: str, *avals: AVal, **params: Any) -> bool:
    """Save the results of matrix products (the cube's work); recompute the rest."""
    return op == "matmul"


def dots_with_no_batch_dims_saveable(op: str, *avals: AVal, **params: Any) -> bool:
    """Save the matrix products without batch dimensions: as ``jnp.matmul`` writes them for
    JAX, a leading dimension is a batch dimension where both operands have it and neither
    has size 1 there (``[b, s, d] @ [d, n]`` has none, ``[b, s, d] @ [b, d, n]`` one)."""
    if op != "matmul":
        return False
    a, b = (x.shape[:-2] if len(x.shape) > 1 else () for x in avals)
    return not any(m != 1 and n != 1 for m, n in zip(reversed(a), reversed(b), strict=False))


def save_only_these_names(*names: str) -> Policy:
    """Save the values tagged by ``pto.checkpoint_name`` with one of ``names``."""
    wanted = frozenset(names)

    def policy(op: str, *avals: AVal, **params: Any) -> bool:
        return op == "checkpoint_name" and params["name"] in wanted

    return policy


def save_any_names_but_these(*names: str) -> Policy:
    """Save the values tagged by ``pto.checkpoint_name`` with any name but ``names``."""
    unwanted = frozenset(names)

    def policy(op: str, *avals: AVal, **params: Any) -> bool:
        return op == "checkpoint_name" and params["name"] not in unwanted

    return policy


def save_from_both_policies(left: Policy, right: Policy) -> Policy:
    """Save what either policy saves."""

    def policy(op: str, *avals: AVal, **params: Any) -> bool:
        return bool(left(op, *avals, **params)) or bool(right(op, *avals, **params))

    return policy


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_from_both_policies=save_from_both_policies,
)
"""The policies of ``jax.checkpoint_policies`` that apply without host memory."""


# ---------------------------------------------------------------- the call


def recompute(
    body: Func,
    args: Sequence[Any],
    cts: Sequence[Any | None],
    policy: Policy | None,
    barrier: bool,
) -> list[Any | None]:
    """The cotangents of ``body``'s parameters at ``args`` given its outputs' ``cts``
    (``None``: zero), with the body's values recomputed from ``args`` (behind a barrier when
    ``barrier``) except those ``policy`` saves, which are the forward pass's."""
    fence = api.optimization_barrier if barrier else (lambda v: v)
    given: dict[Var, Any] | None = None
    if policy is not None:
        keep = [e.out for e in body.eqns if _saves(policy, e)]
        if keep:
            forward = autodiff.replay(body, args)  # CSE makes these the forward pass's own
            given = {v: fence(forward[v]) for v in keep}
    # behind the barrier: what is computed from the inputs and the saved values is computed
    # again, and the saved values themselves are read, not recomputed
    return autodiff.backward(body, autodiff.replay(body, [fence(a) for a in args], given), cts)


def _saves(policy: Policy, e: Eqn) -> bool:
    try:
        return bool(policy(e.op, *(a.aval for a in e.inputs), **e.kwargs))
    except PyptoError:
        raise
    except Exception as err:
        raise TraceError(
            f"the checkpoint policy {getattr(policy, '__name__', policy)!r} failed on "
            f"{e.op} of {', '.join(str(a.aval) for a in e.inputs)}: {err}",
            op="checkpoint",
            hint="a policy is policy(op_name, *avals, **params) -> bool",
        ) from err


class _Checkpointed(custom_vjp):
    """One flat signature of a checkpointed function: tensors in, its body recomputed in the
    backward pass (see the module doc)."""

    kind = "checkpoint"

    def __init__(self, fn: Callable[..., Any], policy: Policy | None, prevent_cse: bool) -> None:
        super().__init__(fn)
        self.policy = policy
        self.prevent_cse = prevent_cse
        self._batched: dict[tuple[bool, ...], _Checkpointed] = {}

    def _defined(self) -> bool:
        return True

    def _closes_over(self, func: Func, out_tree: pytree.TreeDef, free: list[Any]) -> None:
        """A body reading values of an enclosing trace (a layer's weights, say):
        :class:`Checkpoint` passes them as arguments of a call of its own."""
        raise _ClosesOver(func, out_tree, free)

    def vjp(self, ct: Any, args: tuple[Any, ...], result: int) -> tuple[Any, ...]:
        avals = tuple(AVal(tuple(a.shape), a.dtype) for a in args)
        body, _ = self.body(avals)
        # the other results' paths are walked by their own equations' rules
        cts = [ct if i == result else None for i in range(len(body.outputs))]
        grads = recompute(body, args, cts, self.policy, self.prevent_cse)
        return tuple(g if a.dtype.is_floating else None for g, a in zip(grads, avals, strict=True))

    def batch(self, args: list[Any], batched: list[bool], size: int, result: int) -> Any:
        """The call on a batch: the checkpoint of the mapped body (still one call)."""
        key = tuple(batched)
        hit = self._batched.get(key)
        if hit is None:
            axes = tuple(0 if b else None for b in batched)
            mapped = vmap(self.fn, in_axes=axes)
            functools.update_wrapper(mapped, self.fn)
            hit = self._batched[key] = _Checkpointed(mapped, self.policy, self.prevent_cse)
        return pytree.flatten(hit(*args))[0][result]

    def __repr__(self) -> str:
        return f"<pto.checkpoint {self.name}>"


class _ClosesOver(Exception):
    """A checkpointed body read values of an enclosing trace: its graph, output structure
    and those values (the graph's last parameters)."""

    def __init__(self, func: Func, out_tree: pytree.TreeDef, free: list[Any]) -> None:
        super().__init__(func.name)
        self.func, self.out_tree, self.free = func, out_tree, free


class _Closed(Named):
    """A traced body of ``fn`` as a function of its parameters, the closed-over values
    included (they come last)."""

    __slots__ = ("func", "out_tree")

    def __init__(self, fn: Callable[..., Any], func: Func, out_tree: pytree.TreeDef) -> None:
        super().__init__(fn)
        self.func, self.out_tree = func, out_tree

    def __call__(self, *args: Any) -> Any:
        return pytree.unflatten(self.out_tree, interpret.evaluate(self.func, list(args), True))


class _Flat(Named):
    """``fn`` as a function of its arguments' tensor leaves alone: the pytree structure of the
    positional and keyword arguments and the static arguments are fixed."""

    __slots__ = ("fn", "static", "tree")

    def __init__(
        self, fn: Callable[..., Any], tree: pytree.TreeDef, static: dict[int, Any]
    ) -> None:
        super().__init__(fn)
        self.fn, self.tree, self.static = fn, tree, static

    def __call__(self, *leaves: Any) -> Any:
        dyn, kwargs = pytree.unflatten(self.tree, list(leaves))
        it = iter(dyn)
        n = len(dyn) + len(self.static)
        args = [self.static[i] if i in self.static else next(it) for i in range(n)]
        return self.fn(*args, **kwargs)


class Checkpoint:
    """A function whose intermediate values are recomputed for its derivative (what
    :func:`checkpoint` returns)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        prevent_cse: bool,
        policy: Policy | None,
        static_argnums: tuple[int, ...],
    ) -> None:
        self.fn, self.prevent_cse, self.policy = fn, prevent_cse, policy
        self.static_argnums = static_argnums
        self._calls: dict[Any, _Checkpointed] = {}
        self.__name__: str = getattr(fn, "__name__", "f")
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if dispatch.is_eager():
            return self.fn(*args, **kwargs)  # no tape: nothing to recompute for
        pos = tuple(i % len(args) for i in self.static_argnums if -len(args) <= i < len(args))
        if len(pos) != len(self.static_argnums):
            raise TraceError(
                f"checkpoint of {self.__name__} has static_argnums={self.static_argnums} but "
                f"was called with {len(args)} positional argument{'s' if len(args) != 1 else ''}",
                op="checkpoint",
            )
        static = {i: args[i] for i in pos}
        dyn = tuple(a for i, a in enumerate(args) if i not in static)
        leaves, tree = pytree.flatten((dyn, kwargs))
        vals = []
        for k, leaf in enumerate(leaves):
            if isinstance(leaf, str) or (callable(leaf) and not isinstance(leaf, Value)):
                raise TraceError(
                    f"checkpoint of {self.__name__}: argument leaf {k} is a "
                    f"{type(leaf).__name__}, not a tensor",
                    op="checkpoint",
                    hint="name its position in static_argnums",
                )
            vals.append(api.asvalue(leaf, "checkpoint"))
        try:
            key = (tree, tuple(sorted(static.items(), key=lambda kv: kv[0])))
            hit = self._calls.get(key)
        except TypeError:
            raise TraceError(
                f"checkpoint of {self.__name__}: a static argument is not hashable",
                op="checkpoint",
                hint="make it hashable (a tuple rather than a list)",
            ) from None
        if hit is None:
            flat = _Flat(self.fn, tree, static)
            hit = self._calls[key] = _Checkpointed(flat, self.policy, self.prevent_cse)
        try:
            return hit(*vals)
        except _ClosesOver as c:
            # the values it closes over are this trace's: a call of its own, with them as
            # arguments (so they get their cotangents too)
            closed = _Checkpointed(
                _Closed(self.fn, c.func, c.out_tree), self.policy, self.prevent_cse
            )
            return closed(*vals, *c.free)

    def __repr__(self) -> str:
        return f"<pto.checkpoint {self.__name__}>"


def checkpoint(
    fun: Callable[..., Any],
    *,
    prevent_cse: bool = True,
    policy: Policy | None = None,
    static_argnums: int | Sequence[int] = (),
) -> Checkpoint:
    """``fun``, with its intermediate values recomputed in the backward pass rather than kept
    from the forward one (``jax.checkpoint``, also ``pto.remat``): the forward pass keeps
    only ``fun``'s inputs, and the values ``policy`` names (see :data:`checkpoint_policies`).
    Values and derivatives are unchanged; under ``jit`` the backward pass carries the
    recomputation, visible in the IR and in the profile.

    ``prevent_cse=False`` lets CSE merge the recomputation with the forward values (so under
    ``jit`` nothing is recomputed; JAX offers it for use inside ``scan``). Arguments are
    pytrees of tensors; ``static_argnums`` names Python values (hashable) instead.

    >>> import pypto as pto
    >>> f = pto.checkpoint(lambda x: pto.sin(pto.sin(x)))
    >>> g = pto.jit(pto.value_and_grad(lambda x: f(x).sum()), backend="interpret")
    >>> [e.op for e in g.lower(pto.ones(3)).tensor_ir.eqns].count("sin")  # the inner one twice
    3
    >>> float(g(pto.tensor([0.0]))[1][0])
    1.0
    """
    if not callable(fun):
        raise TraceError(
            f"checkpoint needs a function, got {type(fun).__name__}",
            op="checkpoint",
            hint="pto.checkpoint(f), or @pto.checkpoint above a def",
        )
    if policy is not None and not callable(policy):
        raise TraceError(
            f"checkpoint policy must be a function, got {type(policy).__name__}",
            op="checkpoint",
            hint="e.g. policy=pto.checkpoint_policies.dots_saveable",
        )
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if any(not isinstance(i, int) for i in nums):
        raise TraceError(
            f"checkpoint: static_argnums={static_argnums!r} must be argument positions",
            op="checkpoint",
        )
    return Checkpoint(fun, prevent_cse, policy, nums)


remat = checkpoint


# ---------------------------------------------------------------- residuals


def saved_residuals(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[tuple[AVal, str]]:
    """What the backward pass of ``fn`` at ``args`` reads from the forward one, as
    ``jax.ad_checkpoint.saved_residuals``: one ``(aval, source)`` per value, the source an
    argument (``"from the argument x"``) or an equation (``"output of sin from f.py:3"``).

    The joint graph is optimised as ``jit`` does it (the calls inlined, CSE, the barriers
    dropped); its forward part is what ``fn``'s outputs depend on, and a residual is a value
    of the forward part (or an argument) that an equation of the rest reads.

    >>> import pypto as pto
    >>> f = lambda x: pto.sin(pto.sin(x)).sum()
    >>> [s for _, s in saved_residuals(f, pto.ones(3))]  # doctest: +ELLIPSIS
    ['from the argument x', 'output of sin from ...']
    >>> [s for _, s in saved_residuals(pto.checkpoint(f), pto.ones(3))]
    ['from the argument x']
    """
    from pypto.core.passes import PassManager
    from pypto.graph import passes

    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = None
    func = trace(functools.partial(fn, **kwargs), args, arg_names=names)[0]
    joint = autodiff.backward_func(func, len(func.outputs))
    joint = PassManager((passes.inline, *passes.SIMPLIFY, passes.drop_barriers)).run(joint)[0]
    # the forward part: what the function's own outputs depend on
    made = {e.out: e for e in joint.eqns}
    forward: set[Var] = set()
    todo = [o for o in joint.outputs[: len(func.outputs)] if isinstance(o, Var)]
    while todo:
        v = todo.pop()
        if v not in forward:
            forward.add(v)
            e = made.get(v)
            todo += [a for a in e.inputs if isinstance(a, Var)] if e is not None else []
    read = {a for e in joint.eqns if e.out not in forward for a in e.inputs}
    out: list[tuple[AVal, str]] = []
    for i, p in enumerate(joint.params[: len(func.params)]):  # arguments first, in order
        if p in read:
            out.append((p.aval, f"from the argument {func.params[i].hint or f'a{i}'}"))
    for v, _ in joint.consts:
        if v in read and v in forward:
            out.append((v.aval, "a constant"))
    for e in joint.eqns:  # then the forward's values, in program order
        if e.out in read and e.out in forward:
            out.append((e.out.aval, f"output of {e.op} from {e.loc}"))
    return out


def print_saved_residuals(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Print :func:`saved_residuals`, one per line (``jax.ad_checkpoint.print_saved_residuals``).

    >>> import pypto as pto
    >>> print_saved_residuals(lambda x, w: (x @ w).sum(), pto.ones((2, 3)), pto.ones((3, 4)))
    f32[2,3] from the argument x
    f32[3,4] from the argument w
    """
    for aval, src in saved_residuals(fn, *args, **kwargs):
        print(f"{aval} {src}")
