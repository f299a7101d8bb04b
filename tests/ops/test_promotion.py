"""Type promotion equals JAX's: every pair of the six dtypes, weak Python scalars, result_type.

Only dtypes are compared here (values are the business of test_ops_vs_jax.py), so JAX runs
under ``jax.eval_shape``: no kernels are compiled.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxref import DTYPES, FLOATS, assert_matches, name_of

import pypto as pto

SCALARS = (True, 2, 2.5)
# jax.nn.softmax of integers casts its -inf initial value to the integer dtype (JAX's own).
pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered in cast:RuntimeWarning:jax"
)


# op -> (pypto function, JAX function)
BINARY: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "add": (pto.add, jnp.add),
    "sub": (pto.sub, jnp.subtract),
    "mul": (pto.mul, jnp.multiply),
    "div": (pto.div, jnp.true_divide),
    "pow": (pto.pow, jnp.power),
    "maximum": (pto.maximum, jnp.maximum),
    "minimum": (pto.minimum, jnp.minimum),
    "equal": (pto.equal, jnp.equal),
    "not_equal": (pto.not_equal, jnp.not_equal),
    "less": (pto.less, jnp.less),
    "less_equal": (pto.less_equal, jnp.less_equal),
    "greater": (pto.greater, jnp.greater),
    "greater_equal": (pto.greater_equal, jnp.greater_equal),
    "matmul": (pto.matmul, jnp.matmul),
    "where": (lambda x, y: pto.where(True, x, y), lambda x, y: jnp.where(True, x, y)),
    "concat": (lambda x, y: pto.concat([x, y]), lambda x, y: jnp.concatenate([x, y])),
    "clip": (lambda x, y: pto.clip(x, y, y), lambda x, y: jnp.clip(x, y, y)),
}
UNARY: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "exp": (pto.exp, jnp.exp),
    "log": (pto.log, jnp.log),
    "sqrt": (pto.sqrt, jnp.sqrt),
    "reciprocal": (pto.reciprocal, jnp.reciprocal),
    "tanh": (pto.tanh, jnp.tanh),
    "sin": (pto.sin, jnp.sin),
    "cos": (pto.cos, jnp.cos),
    "neg": (pto.neg, jnp.negative),
    "abs": (pto.abs, jnp.abs),
    "relu": (pto.relu, jax.nn.relu),
    "gelu": (pto.gelu, lambda x: jax.nn.gelu(x, approximate=True)),
    "mean": (pto.mean, jnp.mean),
    "sum": (pto.sum, jnp.sum),
    "max": (pto.max, jnp.max),
    "argmax": (pto.argmax, jnp.argmax),
    "softmax": (pto.softmax, jax.nn.softmax),
    "sigmoid": (pto.sigmoid, jax.nn.sigmoid),
    "rsqrt": (pto.rsqrt, jax.lax.rsqrt),
    "silu": (pto.silu, jax.nn.silu),
}

# Where pypto and JAX disagree on *whether* an operation is defined, deliberately:
# pypto refuses (bool abs/pow/matmul have no use; numpy 2 refuses a Python int that does not
# fit, where JAX wraps it), or pypto promotes integers where jax.lax refuses them.
PYPTO_REFUSES = {("abs", "bool"), ("pow", "bool"), ("matmul", "bool")}
PYPTO_PROMOTES = {
    *((op, d) for op in ("rsqrt", "sigmoid", "silu") for d in ("int32", "int8", "bool")),
    ("softmax", "bool"),
}


def _jax_dtype(fn: Callable[..., Any], *args: Any) -> str | None:
    """The dtype name JAX gives, or None when JAX refuses the operands."""
    try:
        return name_of(jax.eval_shape(fn, *args))
    except TypeError:
        return None


def _pto_dtype(fn: Callable[..., Any], *args: Any) -> str | None:
    try:
        out = fn(*args)
    except pto.DTypeError:
        return None
    assert isinstance(out, pto.Tensor)
    assert np.asarray(out).dtype == out.dtype.np
    return out.dtype.name


def _arr(d: pto.DType, shape: tuple[int, ...] = (2,)) -> np.ndarray:
    return np.ones(shape, d.np)


def _check(op: str, d: str, got: str | None, want: str | None) -> None:
    if (op, d) in PYPTO_REFUSES:
        assert got is None and want is not None, (op, d, got, want)
    elif (op, d) in PYPTO_PROMOTES:
        assert got is not None and want is None, (op, d, got, want)
    else:
        assert got == want, f"{op}: pypto gives {got}, JAX {want}"


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize(("a", "b"), list(itertools.product(DTYPES, DTYPES)), ids=str)
def test_binary_promotion_of_every_dtype_pair(op: str, a: pto.DType, b: pto.DType) -> None:
    pfn, jfn = BINARY[op]
    shape = (2, 2) if op == "matmul" else (2,)
    x, y = _arr(a, shape), _arr(b, shape)
    want = _jax_dtype(jfn, x, y)
    key = pto.result_type(a, b).name  # the deviations above concern the promoted dtype
    # Tensors, and numpy arrays on either side (strong, like tensors).
    for args in ((pto.tensor(x), pto.tensor(y)), (x, pto.tensor(y)), (pto.tensor(x), y)):
        _check(op, key, _pto_dtype(pfn, *args), want)
    # 0-d tensors are strong too (unlike Python scalars).
    if op not in ("matmul", "concat"):
        x0, y0 = _arr(a, ()), _arr(b, ())
        _check(op, key, _pto_dtype(pfn, pto.tensor(x0), pto.tensor(y0)), _jax_dtype(jfn, x0, y0))


@pytest.mark.parametrize("op", sorted(set(BINARY) - {"matmul", "concat"}))
@pytest.mark.parametrize("d", DTYPES, ids=str)
@pytest.mark.parametrize("s", SCALARS, ids=repr)
def test_python_scalars_are_weak(op: str, d: pto.DType, s: Any) -> None:
    pfn, jfn = BINARY[op]
    x = _arr(d)
    for args in ((x, s), (s, x)):
        if op == "clip" and args[0] is s:
            continue
        want = _jax_dtype(jfn, *args)
        got = _pto_dtype(pfn, *(pto.tensor(a) if a is x else a for a in args))
        _check(op, pto.result_type(*args).name, got, want)


@pytest.mark.parametrize("op", ["add", "mul", "div", "less", "maximum"])
@pytest.mark.parametrize(("s", "t"), list(itertools.product(SCALARS, SCALARS)), ids=repr)
def test_two_python_scalars(op: str, s: Any, t: Any) -> None:
    pfn, jfn = BINARY[op]
    assert _pto_dtype(pfn, s, t) == name_of(jfn(s, t))


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("d", DTYPES, ids=str)
def test_unary_result_dtype(op: str, d: pto.DType) -> None:
    pfn, jfn = UNARY[op]
    x = _arr(d, (2, 2))
    _check(op, d.name, _pto_dtype(pfn, pto.tensor(x)), _jax_dtype(jfn, x))


def test_the_deviations_are_the_listed_ones() -> None:
    """Each listed deviation is real (so the lists stay minimal)."""
    for op, d in PYPTO_REFUSES:
        pfn, jfn = {**BINARY, **UNARY}[op]
        x = _arr(pto.dtypes.dtype(d), (2, 2))
        args = (x,) if op in UNARY else (x, x)
        assert _jax_dtype(jfn, *args) is not None
        with pytest.raises(pto.DTypeError):
            pfn(*(pto.tensor(a) for a in args))
    for op, d in PYPTO_PROMOTES:
        pfn, jfn = UNARY[op]
        x = _arr(pto.dtypes.dtype(d))
        assert _jax_dtype(jfn, x) is None
        assert pfn(pto.tensor(x)).dtype is pto.float32


@pytest.mark.parametrize("d", [pto.int8, pto.int32], ids=str)
def test_a_python_int_that_does_not_fit_is_refused(d: pto.DType) -> None:
    # numpy 2 refuses (OverflowError) where JAX silently wraps; pypto refuses with a DTypeError.
    big = int(np.iinfo(d.np).max) + 1
    x = pto.tensor(_arr(d))
    with pytest.raises(pto.DTypeError):
        pto.add(x, big)
    with pytest.raises(OverflowError):
        np.add(_arr(d), big)
    # Within range it is fine, and the value is converted to the tensor's dtype.
    assert pto.add(x, big - 2).dtype is d


@pytest.mark.parametrize(("a", "b"), list(itertools.product(DTYPES, DTYPES)), ids=str)
def test_promote_types_and_result_type_match_jax(a: pto.DType, b: pto.DType) -> None:
    assert pto.promote_types(a, b).name == name_of(jnp.promote_types(a.np, b.np))
    assert pto.result_type(a, b).name == name_of(jnp.result_type(a.np, b.np))
    for s in SCALARS:
        assert pto.result_type(a, s).name == name_of(jnp.result_type(a.np, s)), s
        assert pto.result_type(s, a, b).name == name_of(jnp.result_type(s, a.np, b.np)), s
    # tensors and numpy arrays count by their dtype
    assert pto.result_type(pto.tensor(_arr(a)), _arr(b)).name == name_of(
        jnp.result_type(_arr(a), _arr(b))
    )


@pytest.mark.parametrize(
    "args", [(True,), (2,), (2.5,), (True, 2), (2, 2.5), (True, 2.5), (pto.int8, pto.int32, 2.5)]
)
def test_result_type_of_scalars_alone(args: tuple[Any, ...]) -> None:
    jargs = tuple(a.np if isinstance(a, pto.DType) else a for a in args)
    assert pto.result_type(*args).name == name_of(jnp.result_type(*jargs))


# Weak scalars take the tensor's dtype *before* the op, so their value is rounded to it:
# 0.1 and 1/3 are not float16/bfloat16 numbers, 70000 overflows float16, 1e-8 underflows.
@pytest.mark.parametrize("d", FLOATS, ids=str)
@pytest.mark.parametrize("s", [0.1, 1 / 3, 7e4, 1e-8, 3.0e38], ids=repr)
@pytest.mark.parametrize("op", ["add", "mul", "div", "sub", "pow", "less"])
def test_weak_scalar_values_round_like_jax(d: pto.DType, s: float, op: str) -> None:
    pfn, jfn = BINARY[op]
    x = np.array([0.5, 1.0, 3.0, 1000.0], d.np)
    for args in ((x, s), (s, x)):
        with np.errstate(all="ignore"):
            got = pfn(*(pto.tensor(a) if a is x else a for a in args))
        assert_matches(got, jfn(*args), what=f"{op}{args}")
