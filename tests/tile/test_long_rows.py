"""Row kernels over rows too long for UB: the multi-pass kernel of pypto/tile/longrow.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pypto as pto
from tests.tile.conftest import DTYPES, sample

MACHINES = ("tiny", "ascend910b")
FLOATS = ("f32", "f16", "bf16")
C = 120000  # 480 KB of float32 a row: no whole row fits UB (192 KiB)
ROWS = 4


def _check(fn: Any, *args: Any, machine: str) -> None:
    """The NPU result agrees with JAX within the numerics contract's tolerances."""
    report = pto.check(fn, *args, backends=("npu",), machine=machine, verbose=False)
    assert report.ok


def _tile_ir(fn: Any, *args: Any, machine: str = "tiny", **jit: Any) -> str:
    return str(pto.jit(fn, machine=machine, **jit).lower(*args).tile_ir)


REDUCTIONS = {
    "sum": lambda x: x.sum(-1),
    "max": lambda x: x.max(-1),
    "min": lambda x: pto.min(x, axis=-1),
    "mean": lambda x: x.mean(-1),
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_reductions_over_long_rows(op: str, dtype: str, machine: str) -> None:
    x = sample((ROWS, C), DTYPES[dtype])
    _check(REDUCTIONS[op], x, machine=machine)


def _layer_norm(x: Any, w: Any, b: Any) -> Any:
    return pto.layer_norm(x, w, b)


def _rms_norm(x: Any, w: Any, b: Any = None) -> Any:
    return pto.rms_norm(x, w)


def _softmax(x: Any, w: Any = None, b: Any = None) -> Any:
    return pto.softmax(x, axis=-1)


def _log_softmax(x: Any, w: Any, b: Any) -> Any:
    return pto.log_softmax(x, axis=-1)


NORMS = {
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(NORMS))
def test_norms_over_long_rows(op: str, dtype: str, machine: str) -> None:
    d = DTYPES[dtype]
    x, w, b = sample((ROWS, C), d, 0), sample((C,), d, 1), sample((C,), d, 2)
    _check(NORMS[op], x, w, b, machine=machine)


def _passes(text: str) -> int:
    return len(re.findall(r"for %k in 0\.\.\d+ \{", text))


@pytest.mark.parametrize(
    ("fn", "nargs", "passes"),
    [(lambda x: x.sum(-1), 1, 1), (_rms_norm, 2, 2), (_layer_norm, 3, 3), (_softmax, 1, 3)],
)
def test_one_loop_over_the_chunks_per_pass(fn: Any, nargs: int, passes: int) -> None:
    x, w = sample((ROWS, 200000), pto.float32), sample((200000,), pto.float32, 1)
    args = (x, w, w)[:nargs]
    text = _tile_ir(fn, *args)
    assert _passes(text) == passes, text
    # each pass loads its chunk of the row afresh; per-row values start at the identity
    assert re.search(r"tload %x\[%r[^,]*, %k\*\d+ : \+\d+\]", text), text
    assert "texpands" in text


def test_softmax_tile_ir() -> None:
    """Three passes: the row's maximum, the sum of exp, then the outputs chunk by chunk."""
    x = sample((ROWS, 200000), pto.float32)
    text = _tile_ir(_softmax, x)
    loops = text.split("for %k")
    assert len(loops) == 4, text
    assert "trowmax" in loops[1] and "tmax %acc" in loops[1]
    assert "texpands -inf" in loops[0]
    assert "texp" in loops[2] and "trowsum" in loops[2] and "tadd %acc" in loops[2]
    assert "tdiv" in loops[3] and "tstore %out" in loops[3]


def test_awkward_row_length_has_a_tail_chunk() -> None:
    """A prime row length: whole chunks in the loop, then one narrower chunk."""
    n = 100003
    x, w = sample((2, n), pto.float16), sample((n,), pto.float16, 1)
    text = _tile_ir(_rms_norm, x, w)
    m = re.search(r"vec_tile\(rows=\d+, cols=(\d+)\)", text)
    assert m is not None
    cw = int(m.group(1))
    assert cw * 2 % 32 == 0 and n % cw != 0
    assert f"{n // cw * cw} : +{n - n // cw * cw}]" in text  # the tail's window
    _check(_rms_norm, x, w, machine="tiny")
    _check(lambda x: (x.sum(-1), pto.softmax(x, axis=-1)), x, machine="tiny")


def test_short_rows_keep_the_single_pass_kernel() -> None:
    x, w = sample((64, 128), pto.float16), sample((128,), pto.float16, 1)
    text = _tile_ir(_layer_norm, x, w, w)
    assert "for %k" not in text and "texpands" not in text
    assert "vec_tile(rows=" in text and "cols=128)" in text
    assert text.count("tload %x[") == 1


def test_fused_groups_and_several_outputs() -> None:
    """A residual add merges into the norm's kernel; outputs of several levels."""
    x, r, w = (sample((ROWS, C), pto.float32, s) for s in range(3))
    fn = lambda x, r, w: pto.rms_norm(x + r, w)  # noqa: E731
    text = _tile_ir(fn, x, r, w)
    assert text.count("kernel @") == 1 and _passes(text) == 2
    _check(fn, x, r, w, machine="tiny")
    _check(lambda x: (x.sum(-1), x.max(-1), x * 2.0, pto.softmax(x, axis=-1)), x, machine="tiny")
    # a per-column result is no output of the multi-pass kernel: it stays a kernel of its own
    _check(lambda x, w: (pto.softmax(x, axis=-1), w * 2.0), x, w, machine="tiny")


def test_integer_and_bool_rows() -> None:
    xi = sample((ROWS, C), pto.int32)
    _check(lambda x: (x.sum(-1), x.max(-1), pto.min(x, axis=-1)), xi, machine="tiny")
    xf = sample((ROWS, C), pto.float32)
    _check(lambda x: (x > 0).max(-1), xf, machine="tiny")


def test_argmax_over_long_rows_runs_on_its_own() -> None:
    x = sample((ROWS, 200000), pto.float32)
    _check(lambda x: pto.argmax(x * 2.0, axis=-1), x, machine="tiny")


def test_a_user_tile_is_the_chunk() -> None:
    x = sample((ROWS, C), pto.float32)
    text = _tile_ir(_softmax, x, tile=dict(vec=(1, 4000)))
    assert "vec_tile(rows=1, cols=4000)" in text and _passes(text) == 3


def test_a_misaligned_user_chunk_is_a_tile_error() -> None:
    x = sample((ROWS, C), pto.float16)
    with pytest.raises(pto.TileError) as err:
        _tile_ir(_softmax, x, tile=dict(vec=(1, 1001)))
    msg = str(err.value)
    assert "softmax" in msg and str(C) in msg and "f16" in msg
    assert "multiple of 16" in msg and "pto.set_vec_tile_shapes(" in msg


def test_multi_pass_programs_are_race_free_and_double_buffered() -> None:
    x = sample((ROWS, C), pto.bfloat16)
    low = pto.jit(_softmax, machine="tiny").lower(x)
    block = str(low.block_ir)
    assert "x2 by %p_g_" in block  # the chunk loads alternate slots within each pass
    prof = pto.jit(_softmax, machine="tiny").profile(x)  # races raise here
    want = pto.jit(_softmax, backend="interpret")(x)
    got = np.asarray(prof.outputs[0] if isinstance(prof.outputs, list | tuple) else prof.outputs)
    np.testing.assert_allclose(
        got.astype(np.float32), np.asarray(want).astype(np.float32), rtol=2e-2, atol=1e-6
    )


def test_the_doc_shows_the_multi_pass_kernel() -> None:
    """docs/lowering.md shows the real Tile IR of its long-row softmax."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "lowering.md").read_text()
    blocks = [b.rstrip("\n") for b in re.findall(r"```text\n(.*?)```", doc, flags=re.S)]

    def softmax_long(x: Any) -> Any:
        return pto.softmax(x, axis=-1)

    low = pto.jit(softmax_long, machine="tiny").lower(pto.ones((4, 100000), pto.float32))
    assert re.sub(r"\s+#.*", "", str(low.tile_ir)) in blocks, "docs/lowering.md is out of date"


def test_argmax_fused_into_a_long_row_kernel_is_a_tile_error() -> None:
    """Fusion keeps argmax in a group of its own; a row kernel that holds it with other ops
    over rows too long for UB is refused with the op, shape, dtype and a way out."""
    from pypto.graph.ir import Eqn, Var
    from pypto.ops.table import AVal
    from pypto.tile.config import TileConfig
    from pypto.tile.lower import Lowering, lower_row_kernel, plan_row

    func = pto.make_graph(lambda x: x * 2.0)(sample((ROWS, C), pto.float32))
    lw = Lowering(func, pto.npu.machine("tiny"), TileConfig())
    x, y = Var(AVal((ROWS, C), pto.float32)), Var(AVal((ROWS, C), pto.float32))
    i = Var(AVal((ROWS,), pto.int32))
    lw.var_buf[x] = lw.new_buffer("x", pto.float32, ROWS * C, "in")
    eqns = [
        Eqn("exp", (x,), (), y, None),
        Eqn("argmax", (y,), (("axis", 1), ("keepdims", False)), i, None),
    ]
    plan = plan_row(lw, eqns, {i})
    assert plan is not None
    with pytest.raises(pto.TileError) as err:
        lower_row_kernel(lw, plan, "exp_argmax", None)
    msg = str(err.value)
    assert "argmax" in msg and str(C) in msg and "f32" in msg and "hint:" in msg
