"""Each vector and cube instruction against numpy, under the numerics contract: float16 and
bfloat16 are computed in float32 and rounded once; float → int truncates, saturates, NaN → 0."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from pypto import dtypes as dt
from pypto.core.errors import SimulationError

RNG = np.random.default_rng(5)
F32 = np.float32
BF16 = ml_dtypes.bfloat16
SHORT = {np.dtype(d.np): d.short for d in dt.ALL}


def short(a: np.ndarray | np.dtype) -> str:
    return SHORT[np.dtype(a.dtype if isinstance(a, np.ndarray) else a)]


def run_vector(
    sim,
    op_line: str,
    inputs: list[tuple[np.ndarray, bool]],
    out_dtype,
    out_rows: int,
    out_cols: int,
) -> list[np.ndarray]:
    """Run ``op_line`` (with {i0}, {i1}, ... and {o} for the UB tiles) on both vector cores of
    ``tiny``: input i is split by rows between the cores unless it is shared; returns each
    core's output tile."""
    head = [".program op"]
    body: list[str] = []
    tiles: dict[str, str] = {}
    for i, (a, shared) in enumerate(inputs):
        head.append(f".tensor x{i} {short(a)}[{a.shape[0]},{a.shape[1]}] in")
        rows = a.shape[0] if shared else a.shape[0] // 2
        tile = f"UB[{hex(0x4000 * i)}]:{short(a)}[{rows},{a.shape[1]}]"
        tiles[f"i{i}"] = tile
        row = "0" if shared else f"%sub*{rows}"
        body.append(f"  TLOAD {tile}, x{i}[{row}, 0]")
    od = np.dtype(out_dtype)
    head.append(f".tensor y {short(od)}[{2 * out_rows},{out_cols}] out")
    tiles["o"] = f"UB[0x20000]:{short(od)}[{out_rows},{out_cols}]"
    body += [
        "  SET_FLAG MTE2, V, 0",
        "  WAIT_FLAG MTE2, V, 0",
        "  " + op_line.format(**tiles),
        "  SET_FLAG V, MTE3, 0",
        "  WAIT_FLAG V, MTE3, 0",
        f"  TSTORE y[%sub*{out_rows}, 0], {tiles['o']}",
    ]
    prog = "\n".join([*head, ".core aiv", *body]) + "\n"
    prof = sim(prog, "tiny", {f"x{i}": a for i, (a, _) in enumerate(inputs)})
    y = prof.outputs["y"]
    return [y[:out_rows], y[out_rows:]]


def halves(a: np.ndarray) -> list[np.ndarray]:
    return [a[: a.shape[0] // 2], a[a.shape[0] // 2 :]]


def rounded(f, *xs: np.ndarray, out=None) -> np.ndarray:
    """f computed in float32 on float inputs, rounded once to the inputs' dtype."""
    wide = [x.astype(F32) if x.dtype.kind == "f" or x.dtype == BF16 else x for x in xs]
    r = f(*wide)
    return r.astype(out or xs[0].dtype)


def sample(dtype, shape=(16, 64), positive=False) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(F32) * 2
    if positive:
        x = np.abs(x) + 0.1
    return x.astype(dtype)


UNARY = {
    "TEXP": np.exp,
    "TLOG": np.log,
    "TSQRT": np.sqrt,
    "TRSQRT": lambda x: F32(1) / np.sqrt(x),
    "TRECIP": lambda x: F32(1) / x,
    "TABS": np.abs,
    "TNEG": np.negative,
    "TRELU": lambda x: np.maximum(x, x.dtype.type(0)),
    "TTANH": np.tanh,
    "TSIGMOID": lambda x: F32(1) / (F32(1) + np.exp(-x)),
    "TSIN": np.sin,
    "TCOS": np.cos,
    "TGELU": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
}


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("dtype", [F32, np.float16, BF16], ids=["f32", "f16", "bf16"])
def test_unary(sim, op: str, dtype) -> None:
    x = sample(dtype, (16, 64), positive=op in ("TLOG", "TSQRT", "TRSQRT"))
    got = run_vector(sim, f"{op} {{o}}, {{i0}}", [(x, False)], dtype, 8, 64)
    for g, h in zip(got, halves(x)):
        want = rounded(UNARY[op], h)
        if op == "TGELU":
            np.testing.assert_allclose(g.astype(F32), want.astype(F32), rtol=1e-2, atol=1e-2)
        else:
            np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("op", ["TABS", "TNEG", "TRELU"])
@pytest.mark.parametrize("dtype", [np.int32, np.int8])
def test_integer_unary(sim, op: str, dtype) -> None:
    x = RNG.integers(-100, 100, (16, 64)).astype(dtype)
    got = run_vector(sim, f"{op} {{o}}, {{i0}}", [(x, False)], dtype, 8, 64)
    for g, h in zip(got, halves(x)):
        np.testing.assert_array_equal(g, UNARY[op](h))


BINARY = {
    "TADD": np.add,
    "TSUB": np.subtract,
    "TMUL": np.multiply,
    "TDIV": np.divide,
    "TMAX": np.maximum,
    "TMIN": np.minimum,
    "TFMOD": np.fmod,
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("b_shape", ["full", "row", "col"])
@pytest.mark.parametrize("dtype", [F32, np.float16, BF16], ids=["f32", "f16", "bf16"])
def test_binary_with_broadcasting(sim, op: str, b_shape: str, dtype) -> None:
    a = sample(dtype, (16, 64))
    if b_shape == "full":
        b, shared = sample(dtype, (16, 64)), False
    elif b_shape == "row":
        b, shared = sample(dtype, (16, 1)), False  # one value per row: [r,1]
    else:
        b, shared = sample(dtype, (1, 64)), True  # one value per column: [1,c]
    got = run_vector(sim, f"{op} {{o}}, {{i0}}, {{i1}}", [(a, False), (b, shared)], dtype, 8, 64)
    bh = [b, b] if shared else halves(b)
    for g, ha, hb in zip(got, halves(a), bh):
        np.testing.assert_array_equal(g, rounded(BINARY[op], ha, hb))


@pytest.mark.parametrize("op", sorted(BINARY))
def test_tile_scalar(sim, op: str) -> None:
    a = sample(np.float16, (16, 64))
    got = run_vector(sim, f"{op}S {{o}}, {{i0}}, 0.3", [(a, False)], np.float16, 8, 64)
    s = np.float16(0.3).astype(F32)  # the scalar takes the tile's dtype first
    for g, h in zip(got, halves(a)):
        np.testing.assert_array_equal(g, BINARY[op](h.astype(F32), s).astype(np.float16))


@pytest.mark.parametrize("cond", ["EQ", "NE", "LT", "LE", "GT", "GE"])
def test_compare_and_select(sim, cond: str) -> None:
    a = RNG.integers(-3, 3, (16, 64)).astype(F32)
    b = RNG.integers(-3, 3, (16, 64)).astype(F32)
    fn = {
        "EQ": np.equal,
        "NE": np.not_equal,
        "LT": np.less,
        "LE": np.less_equal,
        "GT": np.greater,
        "GE": np.greater_equal,
    }[cond]
    got = run_vector(
        sim, f"TCMP {{o}}, {{i0}}, {{i1}}, {cond}", [(a, False), (b, False)], np.bool_, 8, 64
    )
    for g, ha, hb in zip(got, halves(a), halves(b)):
        np.testing.assert_array_equal(g, fn(ha, hb))
    got = run_vector(sim, f"TCMPS {{o}}, {{i0}}, 0.5, {cond}", [(a, False)], np.bool_, 8, 64)
    for g, ha in zip(got, halves(a)):
        np.testing.assert_array_equal(g, fn(ha, F32(0.5)))
    m = a > b
    got = run_vector(
        sim, "TSEL {o}, {i0}, {i1}, {i2}", [(m, False), (a, False), (b, False)], F32, 8, 64
    )
    for g, hm, ha, hb in zip(got, halves(m), halves(a), halves(b)):
        np.testing.assert_array_equal(g, np.where(hm, ha, hb))


@pytest.mark.parametrize("dtype", [F32, np.float16, BF16, np.int32])
def test_gather(sim, dtype) -> None:
    # each core's source tile is 8x64: indices run over its 512 elements, row-major
    x = (
        sample(dtype, (16, 64))
        if dtype is not np.int32
        else RNG.integers(-1000, 1000, (16, 64)).astype(dtype)
    )
    idx = RNG.integers(0, 512, (16, 32)).astype(np.int32)
    got = run_vector(sim, "TGATHER {o}, {i0}, {i1}", [(x, False), (idx, False)], dtype, 8, 32)
    for g, hx, hi in zip(got, halves(x), halves(idx)):
        np.testing.assert_array_equal(g, hx.reshape(-1)[hi])


def test_gather_index_outside_the_source_tile(sim) -> None:
    x = sample(F32, (16, 64))
    idx = np.zeros((16, 32), np.int32)
    idx[11, 5] = 512  # core aiv1's row 3: one past its 8x64 tile
    with pytest.raises(SimulationError) as ei:
        run_vector(sim, "TGATHER {o}, {i0}, {i1}", [(x, False), (idx, False)], F32, 8, 32)
    msg = str(ei.value)
    assert "index 512 is outside the 512 elements of the source tile" in msg
    assert "pipe V" in msg and "TGATHER" in msg and "aiv1" in msg


def _sort_values(dtype) -> np.ndarray:
    """[16, 160] values with ties, signed zeros, infinities and NaNs of both signs."""
    pool = np.array([1.5, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 3.0, 1.5], F32)
    x = RNG.choice(pool, (16, 160))
    x[:, ::7] = RNG.standard_normal((16, 23))
    return x.astype(dtype)


def _desc_total(row: np.ndarray) -> list[int]:
    """Positions of ``row`` sorted descending in IEEE total order, equal values in order
    (written independently of the simulator: a class for each NaN sign, then value and the
    sign of zero)."""

    def key(j: int) -> tuple[float, float, float]:
        v = float(row[j])
        neg = math.copysign(1.0, v) < 0
        if math.isnan(v):
            return (0.0 if neg else 2.0, 0.0, 0.0)
        return (1.0, v, 0.0 if neg else 1.0)

    return sorted(range(len(row)), key=lambda j: tuple(-c for c in key(j)))


def _structs(tile: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """The (value, index) structures of a sort's output tile."""
    words = np.ascontiguousarray(tile).view(np.uint32)
    vals = words[:, 0::2] if np.dtype(dtype) == F32 else words[:, 0::2].astype(np.uint16)
    assert np.dtype(dtype) == F32 or not (words[:, 0::2] >> 16).any()  # f16: two zero bytes
    return vals.view(dtype), words[:, 1::2].view(np.int32)


@pytest.mark.parametrize("dtype", [F32, np.float16], ids=["f32", "f16"])
def test_sort32_and_merge(sim, dtype) -> None:
    """TSORT32 sorts each block of 32 (descending, total order, stable) carrying the index
    tile; TMRGSORT merges runs of 32 four at a time (160 columns: one group of four runs,
    and a last group of one run)."""
    x = _sort_values(dtype)
    idx = RNG.integers(-(2**31), 2**31 - 1, (16, 160)).astype(np.int32)
    per = 8 // np.dtype(dtype).itemsize
    tmp = f"UB[0x10000]:{short(np.dtype(dtype))}[8,{160 * per}]"
    for merge, groups in ((False, 32), (True, 128)):
        line = "TSORT32 {o}, {i0}, {i1}"
        if merge:
            line = f"TSORT32 {tmp}, {{i0}}, {{i1}}\n  TMRGSORT {{o}}, {tmp}, 32"
        got = run_vector(sim, line, [(x, False), (idx, False)], dtype, 8, 160 * per)
        for g, hx, hi in zip(got, halves(x), halves(idx)):
            vals, ids = _structs(g, dtype)
            for r in range(8):
                want = [
                    b + j for b in range(0, 160, groups) for j in _desc_total(hx[r, b : b + groups])
                ]
                np.testing.assert_array_equal(ids[r], hi[r, want])
                assert vals[r].tobytes() == hx[r, want].tobytes()  # bits: NaN signs, -0.0


@pytest.mark.parametrize("dtype", [F32, np.float16], ids=["f32", "f16"])
def test_merge_two_lists(sim, dtype) -> None:
    """TMRGSORT2 merges two sorted lists of any lengths (here 32 and 64 structures), the
    first list's structures first among equal values."""
    x, y = _sort_values(dtype)[:, :32], _sort_values(dtype)[:, 32:96]
    xi = RNG.integers(0, 1000, x.shape).astype(np.int32)
    yi = RNG.integers(0, 1000, y.shape).astype(np.int32)
    per = 8 // np.dtype(dtype).itemsize
    sd = short(np.dtype(dtype))
    t0, t1 = f"UB[0x10000]:{sd}[8,{32 * per}]", f"UB[0x12000]:{sd}[8,{64 * per}]"
    line = (
        f"TSORT32 {t0}, {{i0}}, {{i1}}\n  TSORT32 {t1}, {{i2}}, {{i3}}\n"
        f"  TMRGSORT2 {{o}}, {t0}, {t1}"
    )
    inputs = [(x, False), (xi, False), (y, False), (yi, False)]
    got = run_vector(sim, line, inputs, dtype, 8, 96 * per)
    for g, hx, hxi, hy, hyi in zip(got, halves(x), halves(xi), halves(y), halves(yi)):
        vals, ids = _structs(g, dtype)
        both, both_i = np.concatenate([hx, hy], 1), np.concatenate([hxi, hyi], 1)
        for r in range(8):
            # each list is sorted first (blocks of 32), so the merge is the whole row's
            # descending order with list 0's elements first among equals
            order = _desc_total(both[r])
            np.testing.assert_array_equal(ids[r], both_i[r, order])
            assert vals[r].tobytes() == both[r, order].tobytes()


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (F32, np.float16),
        (np.float16, F32),
        (F32, BF16),
        (BF16, np.float16),
        (F32, np.int32),
        (np.float16, np.int8),
        (np.int32, F32),
        (np.int8, np.int32),
        (F32, np.bool_),
        (np.int32, np.int8),
    ],
)
def test_convert(sim, src, dst) -> None:
    x = (RNG.standard_normal((16, 64)) * 200).astype(F32)
    if np.dtype(src).kind == "f" or src is BF16:
        x[0, :4] = [np.nan, np.inf, -np.inf, -0.7]  # NaN → 0, saturation, truncation
    x = x.astype(src)
    got = run_vector(sim, "TCVT {o}, {i0}", [(x, False)], dst, 8, 64)
    for g, h in zip(got, halves(x)):
        if np.dtype(dst).kind == "i" and np.dtype(src).kind != "i":
            info = np.iinfo(dst)
            want = np.clip(
                np.trunc(np.nan_to_num(h.astype(np.float64), nan=0.0)), info.min, info.max
            ).astype(dst)
        elif np.dtype(dst) == np.bool_:
            want = h != 0
        else:
            want = h.astype(dst)
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize(("src", "dst"), [(F32, np.int32), (np.int32, F32), (np.float16, BF16)])
def test_bitcast_keeps_every_bit(sim, src, dst) -> None:
    x = (RNG.standard_normal((16, 64)) * 200).astype(F32)
    x[0, :4] = [np.nan, -np.nan, -0.0, np.inf]
    x = x.astype(src) if np.dtype(src).kind == "f" else x.view(np.int32)
    got = run_vector(sim, "TBITCAST {o}, {i0}", [(x, False)], dst, 8, 64)
    for g, h in zip(got, halves(x), strict=True):
        np.testing.assert_array_equal(g.view(np.uint8), np.ascontiguousarray(h).view(np.uint8))


@pytest.mark.parametrize(
    ("op", "fn", "axis"),
    [
        ("TROWSUM", np.sum, 1),
        ("TROWMAX", np.max, 1),
        ("TROWMIN", np.min, 1),
        ("TCOLSUM", np.sum, 0),
        ("TCOLMAX", np.max, 0),
        ("TCOLMIN", np.min, 0),
    ],
)
@pytest.mark.parametrize("dtype", [F32, np.float16], ids=["f32", "f16"])
def test_reductions(sim, op: str, fn, axis: int, dtype) -> None:
    x = sample(dtype, (16, 64))
    r, c = (8, 1) if axis == 1 else (1, 64)
    got = run_vector(sim, f"{op} {{o}}, {{i0}}", [(x, False)], dtype, r, c)
    for g, h in zip(got, halves(x)):
        # float16 sums accumulate in float32 and round once.
        want = fn(h.astype(F32), axis=axis, keepdims=True).astype(dtype)
        np.testing.assert_allclose(g.astype(F32), want.astype(F32), rtol=1e-6)


def test_broadcasts_transpose_extract_fill_and_copy(sim) -> None:
    col = sample(F32, (16, 1))
    got = run_vector(sim, "TROWEXPAND {o}, {i0}", [(col, False)], F32, 8, 64)
    for g, h in zip(got, halves(col)):
        np.testing.assert_array_equal(g, np.broadcast_to(h, (8, 64)))
    row = sample(F32, (1, 64))
    got = run_vector(sim, "TCOLEXPAND {o}, {i0}", [(row, True)], F32, 8, 64)
    for g in got:
        np.testing.assert_array_equal(g, np.broadcast_to(row, (8, 64)))
    x = sample(np.float16, (16, 32))
    got = run_vector(sim, "TTRANS {o}, {i0}", [(x, False)], np.float16, 32, 8)
    for g, h in zip(got, halves(x)):
        np.testing.assert_array_equal(g, h.T)
    got = run_vector(sim, "TEXTRACT {o}, {i0}, 2, 16", [(x, False)], np.float16, 4, 16)
    for g, h in zip(got, halves(x)):
        np.testing.assert_array_equal(g, h[2:6, 16:32])
    got = run_vector(sim, "TEXPANDS {o}, -2.5", [(x, False)], BF16, 8, 32)
    for g in got:
        np.testing.assert_array_equal(g, np.full((8, 32), -2.5, BF16))
    got = run_vector(sim, "TMOV {o}, {i0}", [(x, False)], np.float16, 8, 32)
    for g, h in zip(got, halves(x)):
        np.testing.assert_array_equal(g, h)


@pytest.mark.parametrize(
    ("dtype", "acc", "out"),
    [(np.float16, F32, BF16), (BF16, F32, F32), (np.int8, np.int32, np.int32)],
)
def test_cube_matmul_and_fixpipe_cast(sim, dtype, acc, out) -> None:
    a = RNG.integers(-8, 8, (32, 48)).astype(dtype)
    b = RNG.integers(-8, 8, (48, 16)).astype(dtype)
    d, c_, o = short(np.dtype(dtype)), short(np.dtype(acc)), short(np.dtype(out))
    mat = f"L0C[0x0]:{c_}[32,16], L0A[0x0]:{d}[32,48], L0B[0x0]:{d}[48,16]"
    prog = f"""
    .program mm
    .tensor a {d}[32,48] in
    .tensor b {d}[48,16] in
    .tensor c {o}[32,16] out
    .core aic
      TLOAD L0A[0x0]:{d}[32,48], a[0, 0]
      TLOAD L0B[0x0]:{d}[48,16], b[0, 0]
      SET_FLAG MTE2, M, 0
      WAIT_FLAG MTE2, M, 0
      TMATMUL {mat}
      TMATMUL_ACC {mat}
      SET_FLAG M, FIX, 0
      WAIT_FLAG M, FIX, 0
      TSTORE c[0, 0], L0C[0x0]:{c_}[32,16]
    """
    prof = sim(prog, "tiny", {"a": a, "b": b})
    want = (2 * (a.astype(acc) @ b.astype(acc))).astype(out)
    np.testing.assert_array_equal(prof.outputs["c"], want)


def test_fixpipe_scale_multiplies_in_f32_and_rounds_once(sim) -> None:
    # TSTORE_S: the f32 accumulator times the scale, then one rounding to the tensor's dtype
    # (attention's 1/sqrt(d) on its scores); rounding first and scaling after differs
    a = RNG.standard_normal((32, 64)).astype(np.float16)
    b = RNG.standard_normal((64, 16)).astype(np.float16)
    scale = 1 / math.sqrt(128)
    prog = f"""
    .program mm
    .tensor a f16[32,64] in
    .tensor b f16[64,16] in
    .tensor c f16[32,16] out
    .core aic
      TLOAD L0A[0x0]:f16[32,64], a[0, 0]
      TLOAD L0B[0x0]:f16[64,16], b[0, 0]
      SET_FLAG MTE2, M, 0
      WAIT_FLAG MTE2, M, 0
      TMATMUL L0C[0x0]:f32[32,16], L0A[0x0]:f16[32,64], L0B[0x0]:f16[64,16]
      SET_FLAG M, FIX, 0
      WAIT_FLAG M, FIX, 0
      TSTORE_S c[0, 0], L0C[0x0]:f32[32,16], {scale!r}
    """
    prof = sim(prog, "tiny", {"a": a, "b": b})
    acc = a.astype(F32) @ b.astype(F32)
    np.testing.assert_array_equal(prof.outputs["c"], (acc * F32(scale)).astype(np.float16))
    twice = (acc.astype(np.float16).astype(F32) * F32(scale)).astype(np.float16)
    assert (prof.outputs["c"] != twice).any()


def test_integer_fmod_keeps_the_dividends_sign_and_takes_zero_divisors_as_one(sim) -> None:
    a = RNG.integers(-(2**31), 2**31 - 1, (16, 64), endpoint=True).astype(np.int32)
    b = RNG.integers(-9, 10, (16, 64)).astype(np.int32)  # zeros included
    b[0, :2] = [-1, 2**31 - 1]
    a[0, 0] = -(2**31)  # -2**31 fmod -1 is 0, with no overflow
    got = run_vector(sim, "TFMOD {o}, {i0}, {i1}", [(a, False), (b, False)], np.int32, 8, 64)
    for g, ha, hb in zip(got, halves(a), halves(b)):
        np.testing.assert_array_equal(g, np.fmod(ha, np.where(hb == 0, 1, hb)))


@pytest.mark.parametrize(
    ("op", "fn"),
    [
        ("TAND", np.bitwise_and),
        ("TOR", np.bitwise_or),
        ("TXOR", np.bitwise_xor),
        ("TSHL", lambda a, s: np.where((s < 0) | (s > 31), 0, a << np.clip(s, 0, 31))),
        (
            "TSHR",
            lambda a, s: np.where(
                (s < 0) | (s > 31), np.where(a < 0, -1, 0), a >> np.clip(s, 0, 31)
            ),
        ),
    ],
)
def test_bitwise(sim, op: str, fn) -> None:
    a = RNG.integers(-(2**31), 2**31 - 1, (16, 64), endpoint=True).astype(np.int32)
    b = (
        RNG.integers(-2, 40, (16, 64)).astype(np.int32)
        if op.startswith("TSH")
        else RNG.integers(-(2**31), 2**31 - 1, (16, 64), endpoint=True).astype(np.int32)
    )
    got = run_vector(sim, f"{op} {{o}}, {{i0}}, {{i1}}", [(a, False), (b, False)], np.int32, 8, 64)
    for g, ha, hb in zip(got, halves(a), halves(b)):
        np.testing.assert_array_equal(g, fn(ha, hb).astype(np.int32))
    got = run_vector(sim, "TNOT {o}, {i0}", [(a, False)], np.int32, 8, 64)
    for g, ha in zip(got, halves(a)):
        np.testing.assert_array_equal(g, ~ha)
