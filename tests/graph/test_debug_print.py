"""``pto.debug.print`` against ``jax.debug.print``: the same text eagerly, under ``jit`` on both
backends, ``grad``, ``vmap``, loops and nested ``jit``; printed when the program runs, in
program order; the equation kept by the passes, not merged, not folded, round-tripping as
text; errors at the caller's line."""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto
from pypto.graph import parser

from .locations import line
from .roundtrip import assert_round_trip

HERE = os.path.basename(__file__)
X = np.array([0.5, 1.0, 2.0, -3.0], np.float32)  # exact in every step below


def f(x: Any) -> Any:
    y = x * 2.0
    pto.debug.print("y={y} s={} m={:.2f}", y.sum(), y.max(), y=y)
    return (y * y).sum()


def jf(x: Any) -> Any:
    y = x * 2.0
    jax.debug.print("y={y} s={} m={:.2f}", y.sum(), y.max(), y=y)
    return (y * y).sum()


def jax_text(run: Any, capsys: Any) -> str:
    run()
    jax.effects_barrier()
    return capsys.readouterr().out


def test_the_same_text_as_jax_eagerly_and_under_jit_on_both_backends(capsys: Any) -> None:
    want = jax_text(lambda: jax.jit(jf)(X), capsys)
    assert want.count("\n") == 1
    for run in (
        lambda: f(X),
        lambda: pto.jit(f)(X),
        lambda: pto.jit(f, machine="tiny")(X),
        lambda: pto.jit(f, machine="ascend910b")(X),
    ):
        run()
        assert capsys.readouterr().out == want


def test_grad_prints_the_forward_once_and_vmap_each_example(capsys: Any) -> None:
    want = jax_text(lambda: jax.grad(jf)(X), capsys)
    for run in (
        lambda: pto.grad(f)(X),
        lambda: pto.jit(pto.grad(f))(X),
        lambda: pto.jit(pto.grad(f), machine="tiny")(X),
        lambda: pto.value_and_grad(f)(X),
    ):
        run()
        assert capsys.readouterr().out == want
    batch = np.stack([X, -X, X + 1.0])
    want = jax_text(lambda: jax.vmap(jf)(batch), capsys)
    pto.vmap(f)(batch)
    assert capsys.readouterr().out == want
    pto.jit(pto.vmap(f))(batch)
    assert capsys.readouterr().out == want


def test_loops_print_each_iteration_in_order_at_every_run(capsys: Any) -> None:
    def body(lax: Any, debug: Any) -> Any:
        def step(c: Any, x: Any) -> Any:
            debug.print("c={} x={}", c, x)
            return c + x, c

        return lambda c, xs: lax.scan(step, c, xs)

    c0 = np.float32(1.0)
    want = jax_text(lambda: jax.jit(body(jax.lax, jax.debug))(c0, X), capsys)
    assert want.count("\n") == 4
    g = pto.jit(body(pto.lax, pto.debug))
    g(c0, X)
    assert capsys.readouterr().out == want
    g(c0, X)  # printed when it runs, not when it is traced
    assert capsys.readouterr().out == want
    assert g.cache_info().traces == 1
    # nested jit: the inner prints are the outer program's
    pto.jit(lambda x: pto.jit(f)(x) + 1.0, machine="tiny")(X)
    assert capsys.readouterr().out == jax_text(lambda: jf(X), capsys)


def test_the_equation_is_kept_not_merged_not_folded_and_round_trips(capsys: Any) -> None:
    def g(x: Any) -> Any:
        for _ in range(2):
            pto.debug.print("same {}", x)  # two calls: two prints, not one
        pto.debug.print("constant {}", 7)  # folded at compile time, it would print once
        return x + 1.0

    traced = pto.make_graph(g)(X)
    assert str(traced).count(" = debug_print ") == 3
    assert_round_trip(traced)
    h = pto.jit(g)
    h(X)
    h(X)
    out = capsys.readouterr().out.splitlines()
    assert out == ["same [ 0.5  1.   2.  -3. ]"] * 2 + ["constant 7"] + (
        ["same [ 0.5  1.   2.  -3. ]"] * 2 + ["constant 7"]
    )
    # the lowered program has none: their values are its last outputs (a constant stays in
    # the plan)
    lw = h.lower(X)
    assert " = debug_print " not in str(lw.tensor_ir) and len(lw.tensor_ir.outputs) == 3
    assert [p.count for p in lw.prints] == [1, 1, 0]
    # a format string with brackets, quotes and IR words parses back
    text = str(pto.make_graph(lambda x: pto.debug.print("[inf] 'q' {} none", x))(X))
    assert str(parser.parse(text)) == text


def test_a_value_inside_a_fused_kernel_prints_as_the_chip_computed_it(capsys: Any) -> None:
    # exp's result lives only inside the fused kernel: printing it makes the kernel store it
    def g(x: Any) -> Any:
        e = pto.exp(x.astype(pto.float16))
        pto.debug.print("{}", e)
        return (e * 2).astype(pto.float32)

    out = pto.jit(g, machine="tiny")(X)
    shown = capsys.readouterr().out.strip()
    e = np.asarray(out) / 2
    assert shown == str(e.astype(np.float16))


def test_errors_name_the_call() -> None:
    where = line() + 3

    def bad(x: Any) -> Any:
        pto.debug.print("{} {}", x)
        return x

    with pytest.raises(pto.TraceError, match=r"the format '\{\} \{\}' does not fit") as e:
        pto.jit(bad)(X)
    assert f"{HERE}:{where}" in str(e.value)
    with pytest.raises(pto.TraceError, match="needs a format string first"):
        pto.debug.print(X)  # type: ignore[arg-type]
    with pytest.raises(pto.TraceError, match="argument 'p' is a dict"):
        pto.debug.print("{p}", p={"a": X})
    with pytest.raises(pto.TraceError, match="argument 0 is a tuple"):
        pto.jit(lambda x: pto.debug.print("{}", (x, x)))(X)


def test_to_jax_prints_through_jax(capsys: Any) -> None:
    y = pto.to_jax(f)(jnp.asarray(X))
    jax.effects_barrier()
    assert capsys.readouterr().out == jax_text(lambda: jf(X), capsys)
    assert float(y) == float(jf(X))
