"""Tracing and jit: pytrees, the compile cache, static arguments, nested transforms, errors."""

from __future__ import annotations

import gc
import os
from typing import Any, NamedTuple

import numpy as np
import pytest

import pypto as pto
from pypto.graph.parser import parse
from pypto.graph.printer import print_func

from .locations import line

HERE = os.path.basename(__file__)


def test_jit_matches_eager_and_caches_by_signature() -> None:
    def f(x, w):
        return pto.gelu(x @ w).sum(-1)

    j = pto.jit(f)
    x, w = pto.random.normal(0, (4, 8)), pto.random.normal(1, (8, 3))
    np.testing.assert_array_equal(j(x, w).numpy(), f(x, w).numpy())
    j(x, w)
    assert (j.cache_info().hits, j.cache_info().traces) == (1, 1)
    j(x.astype(pto.float16), w.astype(pto.float16))
    j(pto.random.normal(2, (5, 8)), w)
    assert j.cache_info().traces == 3 and j.cache_info().size == 3


def test_pytrees_in_and_out() -> None:
    @pto.jit
    def f(params, batch):
        h = batch["x"] @ params[0] + params[1]
        return {"y": h, "stats": (h.sum(), [h.max()])}

    params = [pto.ones((3, 2)), pto.zeros((2,))]
    out = f(params, {"x": pto.ones((4, 3))})
    assert set(out) == {"y", "stats"}
    assert out["y"].shape == (4, 2) and float(out["stats"][0]) == 24.0
    assert float(out["stats"][1][0]) == 3.0


class Params(NamedTuple):
    w: Any
    b: Any


def test_named_tuples_are_pytree_nodes_as_in_jax() -> None:
    """jit, grad and vmap take and give named tuples back as themselves."""
    p = Params(pto.ones((3, 2)), pto.zeros((2,)))
    x = pto.ones((4, 3))
    out = pto.jit(lambda p, x: Params(x @ p.w, p.b + 1), backend="interpret")(p, x)
    assert type(out) is Params and out.w.shape == (4, 2) and out.b.numpy().tolist() == [1, 1]
    g = pto.grad(lambda p: ((x @ p.w + p.b) ** 2).sum())(p)
    assert type(g) is Params and g.w.numpy().tolist() == [[24.0, 24.0]] * 3
    v = pto.vmap(lambda p, x: x @ p.w + p.b, in_axes=(Params(None, None), 0))(p, x)
    assert v.shape == (4, 2)
    with pytest.raises(pto.TraceError, match="does not match the structure"):
        pto.vmap(lambda p, x: x @ p.w, in_axes=((None, None), 0))(p, x)


def test_numpy_and_python_scalar_arguments() -> None:
    f = pto.jit(lambda x, s: x * s)
    y = f(np.ones(3, np.float16), 2.5)
    assert y.dtype is pto.float16 and y.numpy().tolist() == [2.5, 2.5, 2.5]
    assert f(np.ones(3, np.float16), 3.0).numpy().tolist() == [3.0] * 3
    assert f.cache_info().traces == 2  # Python scalars are static: baked in, weakly typed


def test_static_argnums() -> None:
    f = pto.jit(lambda x, axis: x.sum(axis), static_argnums=1)
    x = pto.ones((2, 3))
    assert f(x, 0).shape == (3,) and f(x, 1).shape == (2,)
    assert f.cache_info().traces == 2
    f(x, 1)
    assert f.cache_info().hits == 1
    with pytest.raises(pto.TraceError, match="not hashable"):
        pto.jit(lambda x, a: x, static_argnums=1)(x, [1, 2])


def test_decorator_with_options_and_unfused() -> None:
    @pto.jit(fuse=False)
    def f(x):
        return pto.exp(x) * 2 + 1

    low = f.lower(pto.ones(4))
    text = str(low.tensor_ir)
    assert text.count("group @") == 3
    assert "group @k0 exp" in text and "group @k2 add" in text
    fused = pto.jit(lambda x: pto.exp(x) * 2 + 1).lower(pto.ones(4))
    assert str(fused.tensor_ir).count("group @") == 1
    assert "group @k0 exp_mul_add" in str(fused)


def test_lower_snapshots_every_pass() -> None:
    low = pto.jit(lambda x: (x * 1.0 + 0.0).T.T).lower(pto.ones((2, 3)), snapshots=True)
    names = [s.name for s in low.snapshots]
    assert names == [
        "simplify",
        "shifted_sums",
        "constant_fold",
        "cse",
        "dce",
        "drop_barriers",
        "fuse",
    ]
    assert low.snapshots[0].changed
    assert "transpose" in low.snapshots[0].before and "transpose" not in low.tensor_ir.__str__()


def test_compiled_checks_its_signature() -> None:
    f = pto.jit(lambda x, y: x + y)
    c = f.lower(pto.ones(2), pto.ones(2)).compile()
    assert c(pto.ones(2), pto.ones(2)).numpy().tolist() == [2.0, 2.0]
    with pytest.raises(pto.TraceError, match="compiled for") as e:
        want = line() + 1
        c([pto.ones(2)], pto.ones(2))
    assert "structure" in str(e.value) and "jit" in str(e.value)
    assert "([*], *)" in str(e.value) and "(*, *)" in str(e.value)
    assert f"{HERE}:{want}" in str(e.value)
    with pytest.raises(pto.TraceError, match="compiled for f32"):
        c(pto.ones(3), pto.ones(3))


def test_python_control_flow_on_a_tracer_points_at_the_user_line() -> None:
    def f(x):
        if x.sum() > 0:  # data-dependent Python branch
            return x
        return -x

    want = line() - 4
    with pytest.raises(pto.TraceError) as e:
        pto.jit(f)(pto.ones(3))
    msg = str(e.value)
    assert "bool" in msg and "traced" in msg and "pto.where" in msg
    assert f"{HERE}:{want}" in msg
    with pytest.raises(pto.TraceError, match="int"):
        pto.jit(lambda x: int(x))(pto.ones(()))
    with pytest.raises(pto.TraceError, match="float"):
        pto.jit(lambda x: float(x))(pto.ones(()))


def test_make_graph_prints_user_lines() -> None:
    def model(x, w):
        return pto.relu(x @ w)

    g = pto.make_graph(model)(pto.ones((2, 3)), pto.ones((3, 4)))
    text = str(g)
    assert text.startswith("func @model(%x: f32[2,3], %w: f32[3,4]) -> (f32[2,4]) {")
    assert f"# {HERE}:" in text and "group @relu0 relu {" in text
    assert "<pre" in g._repr_html_()


def test_closures_and_constants_are_staged() -> None:
    w = pto.random.normal(0, (8, 8))
    mask = np.tril(np.ones((8, 8), bool))
    f = pto.jit(lambda x: pto.where(mask, x @ w, 0.0))
    x = pto.random.normal(1, (8, 8))
    np.testing.assert_allclose(f(x).numpy(), np.where(mask, x.numpy() @ w.numpy(), 0), rtol=1e-6)


def test_jit_inside_a_trace_inlines() -> None:
    inner = pto.jit(lambda x: pto.exp(x) + 1)
    outer = pto.jit(lambda x: inner(x) * 2)
    low = outer.lower(pto.zeros(3))
    assert [e.op for e in low.tensor_ir.eqns] == ["exp", "add", "mul"]
    assert outer(pto.zeros(3)).numpy().tolist() == [4.0, 4.0, 4.0]


def test_unknown_backend() -> None:
    with pytest.raises(pto.PyptoError, match="unknown backend"):
        pto.jit(lambda x: x, backend="gpu")


def test_npu_is_the_default_backend_and_agrees_with_interpret() -> None:
    f = pto.jit(lambda x: pto.exp(x) * 2 + 1, machine="tiny")
    x = pto.random.normal(0, (16, 64))
    assert f.backend == "npu"
    ref = pto.jit(lambda x: pto.exp(x) * 2 + 1, backend="interpret")(x)
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(ref))
    # views and constants only: no kernel, still a program
    g = pto.jit(lambda x: x.reshape(64, 16), machine="tiny")
    np.testing.assert_array_equal(np.asarray(g(x)), np.asarray(x).reshape(64, 16))


def test_traced_ir_round_trips_with_constants() -> None:
    def f(x):
        return pto.scaled_dot_product_attention(x, x, x, causal=True).sum()

    g = pto.jit(f).lower(pto.ones((2, 8, 4))).tensor_ir
    consts: dict[str, np.ndarray] = {}
    text = print_func(g, consts)
    back = parse(text, consts).verify()
    assert print_func(back) == text
    with pytest.raises(pto.PyptoError, match="constant @c0"):
        parse(text)
    # a small 2-D constant is printed inline, on one line, and parses back
    h = pto.jit(f).lower(pto.ones((2, 2, 4))).tensor_ir
    line = next(ln for ln in print_func(h).splitlines() if "= const" in ln)
    assert line.endswith("const [[true, false], [true, true]]")
    assert print_func(parse(print_func(h)).verify()) == print_func(h)


def test_infinite_and_nan_parameters_round_trip() -> None:
    """A constant padding value is the pad's own parameter, printed as Python prints the
    float (``-inf``, ``nan``), and parses back to the same graph."""

    def f(x):
        return pto.lax.pad(x, -np.inf, [(1, 2, 1)]), pto.lax.pad(x, np.nan, [(0, 1, 0)])

    g = pto.jit(f).lower(pto.ones((3,))).tensor_ir
    text = print_func(g)
    assert "lax_pad %x [config=((1, 2, 1),) value=-inf]" in text
    assert "value=nan]" in text and "where" not in text
    assert print_func(parse(text).verify()) == text


@pytest.mark.parametrize(
    ("text", "where", "expected"),
    [
        ("fun @f() -> () {", "line 1, column 1", "func @name"),
        (
            "func @f(%x: f32[2]) -> (f32[2]) {\n  %0: f32[2] = exp %y\n  return %0\n}",
            "line 2",
            "a defined value",
        ),
        (
            "func @f(%x: f32[2]) -> (f32[2]) {\n  %0 = exp %x\n  return %0\n}",
            "line 2",
            "'%name: type = op",
        ),
        ("func @f(%x: f32[2]) -> (f32[2]) {\n  %0: f32[2] = exp %x\n", "line 2", "'return"),
    ],
)
def test_parse_errors_give_line_column_and_expectation(text: str, where: str, expected: str):
    with pytest.raises(pto.PyptoError) as e:
        parse(text)
    assert where in str(e.value) and expected in str(e.value)


def test_verify_rejects_ill_typed_ir() -> None:
    text = (
        "func @f(%x: f32[2,3]) -> (f32[3]) {\n"
        "  %0: f32[3] = sum %x [axes=(1,) keepdims=false]\n  return %0\n}"
    )
    with pytest.raises(pto.PyptoError, match="rules give f32\\[2\\]"):
        parse(text).verify()


def test_compiling_pauses_the_garbage_collector_and_restores_it() -> None:
    """The compiler's IR objects all stay live: full collections during a compile only
    rescan them. The collector is back on afterwards, after an error too, and stays off
    for a caller that had turned it off."""
    seen: list[bool] = []

    def f(x: Any) -> Any:
        seen.append(gc.isenabled())
        return x * 2 + 1

    x = np.ones((4, 8), np.float32)
    assert gc.isenabled()
    low = pto.jit(f, machine="tiny").lower(x)
    assert seen == [False] and gc.isenabled()
    assert low.isa.static_size() > 0 and gc.isenabled()  # the lazy levels too
    with pytest.raises(pto.ShapeError):
        pto.jit(lambda a: a @ a, backend="interpret")(x)
    assert gc.isenabled()
    gc.disable()
    try:
        pto.jit(f, backend="interpret")(x + 1)
        assert not gc.isenabled()
    finally:
        gc.enable()
