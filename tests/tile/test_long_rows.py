"""Row kernels over rows too long for UB: the multi-pass kernel of pypto/tile/longrow.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pypto as pto
from tests.tile.conftest import DTYPES, assert_same, npu_and_interpret, sample

MACHINES = ("tiny", "ascend910b")
FLOATS = ("f32", "f16", "bf16")
C = 120000  # 480 KB of float32 a row: no whole row fits UB (192 KiB)
ROWS = 4
PRIME = 100003  # a prime row length: no divisor to split a row by


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


def test_argmax_over_long_rows_fuses_with_its_operand() -> None:
    """argmax is a reduction of the multi-pass kernel like the others: of the first level
    over its operand, of a later one over softmax's output (the third pass)."""
    x = sample((ROWS, 200000), pto.float32)
    fn = lambda x: pto.argmax(x * 2.0, axis=-1)  # noqa: E731
    text = _tile_ir(fn, x)
    assert text.count("kernel @") == 1 and _passes(text) == 1, text
    assert_same(fn, x)
    fn = lambda x: (pto.argmax(pto.softmax(x, axis=-1), axis=-1), pto.argmax(x, axis=-1))  # noqa: E731
    text = _tile_ir(fn, x)
    assert text.count("kernel @") == 1 and _passes(text) == 3, text
    assert_same(fn, x)


def _chunk(text: str) -> int:
    m = re.search(r"vec_tile\(rows=\d+, cols=(\d+)\)", text)
    assert m is not None, text
    return int(m.group(1))


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("dtype", [*FLOATS, "i32", "i8", "bool"])
def test_argmax_over_long_prime_rows(dtype: str, machine: str) -> None:
    """One multi-pass kernel: a running maximum and its index over the chunks and the tail."""
    x = sample((3, PRIME), DTYPES[dtype])
    fn = lambda x: pto.argmax(x, axis=-1)  # noqa: E731
    text = _tile_ir(fn, x, machine=machine)
    assert text.count("kernel @") == 1 and _passes(text) == 1, text
    assert PRIME % _chunk(text) and "trowmax" in text and "tsel" in text
    assert_same(fn, x, machine=machine)
    assert_same(lambda x: pto.argmax(x[1]), x, machine=machine)


@pytest.mark.parametrize("dtype", FLOATS)
def test_argmax_ties_and_nans_across_chunks(dtype: str) -> None:
    """Ties keep the first index and the first NaN wins, whichever chunks they fall in, on
    rows that share a tile (8 rows: tiles of 4 on the small machine)."""
    n = 50021  # prime; two bytes an element are too many for one row in UB
    fn = lambda x: pto.argmax(x, axis=-1)  # noqa: E731
    x = np.array(sample((8, n), pto.float32))
    cw = _chunk(_tile_ir(fn, pto.tensor(x).astype(DTYPES[dtype])))
    tail = n // cw * cw
    assert 0 < tail < n and n // cw >= 3
    nan, inf = np.nan, np.inf
    x[0, [cw - 1, cw]] = 9.0  # a tie across the first chunk boundary
    x[1, [cw, 3 * cw - 1, n - 1]] = 9.0  # ... across several chunks and the tail
    x[2, [tail - 1, tail]] = 9.0  # ... across the loop's last chunk and the tail
    x[3, [5, 2 * cw + 1, n - 1]] = (9.0, nan, nan)  # the first NaN beats a greater number
    x[4, [0, n - 3]] = (inf, nan)  # a NaN in the tail beats +inf
    x[5] = -inf  # every element the maximum
    x[6, n - 1] = inf  # the last element
    x[7, [3, cw + 1]] = (nan, inf)  # a NaN in the first chunk holds
    want = [cw - 1, cw, tail - 1, 2 * cw + 1, n - 3, 0, n - 1, 3]
    t = pto.tensor(x).astype(DTYPES[dtype])
    got, _ = npu_and_interpret(fn, t)
    assert got.tolist() == want
    assert_same(fn, t)
    b = np.zeros((2, PRIME), bool)
    b[0, [PRIME - 1, PRIME - 2]] = True  # the first True is in the tail; no True at all
    assert_same(fn, pto.tensor(b))


def test_a_scalar_result_of_one_long_row() -> None:
    """A 1-D reduction's scalar is the per-row value of the single row."""
    x = sample((PRIME,), pto.float16)
    _check(lambda x: (x.mean(), x.max() - x.min(), pto.argmax(x)), x, machine="tiny")


def test_an_input_of_other_rows_is_copied_once() -> None:
    """An input laid out in rows of another length holds no chunk window: it is copied into
    rows of C once, not by every pass that loads it."""
    x = sample((12, 40000), pto.float16)
    fn = lambda x: pto.softmax((x * 2.0).reshape(4, 120000), axis=-1)  # noqa: E731
    text = _tile_ir(fn, x)
    assert text.count("kernel @relayout") == 1 and _passes(text) == 3, text
    _check(fn, x, machine="tiny")


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


def test_a_row_whose_chunks_do_not_fit_is_a_tile_error() -> None:
    """Not even the narrowest chunk fits a machine with a tiny UB: the error names the op, the
    kernel's rows and dtypes, and a way out."""
    small = pto.npu.machine("tiny").replace(ub_bytes=512)
    x = sample((2, 1009), pto.float32)
    with pytest.raises(pto.TileError) as err:
        pto.jit(lambda x: pto.argmax(x, axis=-1), machine=small)(x)
    msg = str(err.value)
    assert "argmax" in msg and "1009" in msg and "f32" in msg and "512 bytes" in msg
    assert "hint:" in msg


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((2, 12000), "f32"), ((2, 20011), "f32"), ((2, 40000), "f16"), ((2, 47000), "bool")],
)
def test_argmax_over_medium_rows_counts_its_temporaries(
    shape: tuple[int, int], dtype: str, machine: str
) -> None:
    # rows that fit UB alone but not with argmax's masks and indices: the estimate counts
    # them (RowRule.scratch), so these take the multi-pass kernel instead of overflowing UB
    x = sample(shape, DTYPES[dtype])
    got = np.asarray(pto.jit(lambda x: pto.argmax(x, axis=-1), machine=machine)(x))
    np.testing.assert_array_equal(got, np.argmax(np.asarray(x), axis=-1))


def test_a_relayout_of_long_rows_moves_runs_that_fit_ub() -> None:
    # x*2 lays out its 1-D result in rows of its own; the softmax over rows of 120000 reads
    # it through a relayout whose runs (the common divisor of the row lengths) would have
    # been 480 KB, more than UB
    x = sample((480000,), pto.float32)
    _check(lambda x: pto.softmax((x * 2).reshape(4, 120000), -1), x, machine="tiny")
