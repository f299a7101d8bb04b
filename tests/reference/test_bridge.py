"""The JAX bridge: to_jax computes what pypto computes; check compares and reports."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import pypto as pto
from pypto.core.tolerance import tolerance
from pypto.graph.tracer import trace
from pypto.ops import elementwise as ew
from pypto.ops.table import OPS
from pypto.reference import compare
from pypto.reference.jax_bridge import precisions


def model(x, w):
    return {"y": pto.softmax(pto.gelu(x @ w)), "n": pto.rms_norm(x).sum()}


def test_to_jax_is_the_same_computation() -> None:
    x = pto.random.normal(0, (4, 8), pto.float16)
    w = pto.random.normal(1, (8, 6), pto.float16)
    ours = model(x, w)
    theirs = pto.to_jax(model)(np.asarray(x), np.asarray(w))
    assert set(theirs) == {"y", "n"}
    assert isinstance(theirs["y"], jax.Array) and theirs["y"].dtype == np.float16
    assert compare("y", ours["y"], np.asarray(theirs["y"]), k=8).ok
    jitted = jax.jit(pto.to_jax(model))(np.asarray(x), np.asarray(w))
    assert compare("n", ours["n"], np.asarray(jitted["n"]), k=8 * 4).ok


def test_check_reports_each_backend_and_output(capsys: pytest.CaptureFixture[str]) -> None:
    x, w = pto.random.normal(0, (4, 8)), pto.random.normal(1, (8, 6))
    report = pto.check(model, x, w, verbose=True)  # (other tests may leave an IPython shell)
    out = capsys.readouterr().out
    assert report.ok and "all outputs match JAX" in out
    assert out.count("eager") == 2 and out.count("interpret") == 2
    assert "max|Δ|" in out and "rtol" in out
    assert "<table>" in report._repr_html_()


def test_check_prints_only_where_the_report_does_not_show_itself(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    x = pto.random.normal(0, (4, 8))
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: object()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)
    report = pto.check(pto.exp, x)
    assert report.ok and capsys.readouterr().out == ""  # the cell shows the returned report
    pto.check(pto.exp, x, verbose=True)
    assert "all outputs match JAX" in capsys.readouterr().out
    fake.get_ipython = lambda: None  # type: ignore[attr-defined]
    pto.check(pto.exp, x)  # IPython imported, but no shell running: a script
    assert "all outputs match JAX" in capsys.readouterr().out


def test_check_raises_on_a_wrong_op() -> None:
    # A subtly wrong exp (one part in a thousand) must not pass the float32 tolerance.
    wrong = ew.in_f32(lambda a: np.exp(a) * np.float32(1.001))
    right = OPS["exp"].impl
    object.__setattr__(OPS["exp"], "impl", wrong)  # ops are frozen; the test swaps one in place
    try:
        with pytest.raises(pto.NumericsMismatch) as e:
            pto.check(lambda x: pto.exp(x) * 2, pto.tensor([0.5, 1.0]), verbose=False)
        assert "FAIL" in str(e.value) and "interpret" in str(e.value)
    finally:
        object.__setattr__(OPS["exp"], "impl", right)


def test_compare_judges_nan_inf_and_shape() -> None:
    nan = np.array([np.nan, 1.0], np.float32)
    assert compare("a", nan, nan).ok
    assert not compare("a", nan, np.array([0.0, 1.0])).ok
    inf = np.array([np.inf, -np.inf], np.float32)
    assert compare("b", inf, inf).ok and not compare("b", inf, -inf).ok
    assert not compare("c", np.zeros(2, np.float32), np.zeros(3)).ok
    assert compare("d", np.array([1, 2], np.int32), np.array([1, 2])).rtol == 0.0


def test_compare_scales_sums_that_cancel_by_their_terms() -> None:
    # four f32 terms of about 1 summing to 3.5e-4: one rounding of the terms (4e-8) is far
    # above what the result's own size allows, and within what the terms' size allows
    got, want = np.float32(3.5e-4 + 4.5e-8), np.float64(3.5e-4)
    assert not compare("s", got, want, k=4).ok
    assert compare("s", got, want, k=4, scale=1.0).ok
    assert not compare("s", np.float32(3.5e-4 + 1e-3), want, k=4, scale=1.0).ok


def test_results_rounded_to_a_coarser_dtype_on_the_way_get_its_tolerance() -> None:
    """``(a @ b).astype(float32)`` of float16 operands: the product is rounded to float16, so
    a summation order other than JAX's shows as one float16 unit, which float32's tolerance
    refused (eager mode itself failed the check on ascend910b's 256-long sums)."""
    rng = np.random.default_rng(755)
    a = pto.tensor(rng.uniform(-2, 2, (48, 256)).astype(np.float16))
    b = pto.tensor(rng.uniform(-2, 2, (256, 256)).astype(np.float16))

    def f(a: pto.Tensor, b: pto.Tensor) -> tuple[pto.Tensor, pto.Tensor]:
        return (a @ b).astype(pto.float32), a.astype(pto.float32) * 2

    func, _, _ = trace(f, [a, b])
    assert precisions(func) == [pto.float16, pto.float32]
    report = pto.check(f, a, b, machine="ascend910b", verbose=False)
    assert [c.rtol for _, c in report.rows[:2]] == [tolerance(pto.float16, 257)[0], 1e-5]
    # the coarser dtype only widens a comparison, and only to that dtype's tolerance
    one_ulp = np.float32(1 + 2**-10)
    assert compare("x", one_ulp, np.float64(1.0), precision=pto.float16).ok
    assert not compare("x", one_ulp, np.float64(1.0)).ok
    assert not compare("x", np.float32(1.01), np.float64(1.0), precision=pto.float16).ok
