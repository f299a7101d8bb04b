"""``with pto.hint(tile=..., cores=..., swizzle=...)``: per-op overrides from tensor code, kept
on the equations, printed and parsed, and honoured by the kernel the op fuses into."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import pypto as pto
from pypto.graph.ir import Func
from pypto.graph.parser import parse
from pypto.graph.printer import print_func
from pypto.npu.profile import Profile

HERE = os.path.basename(__file__)
rng = np.random.default_rng(0)
X = rng.standard_normal((64, 256)).astype(np.float32)
A = rng.standard_normal((512, 256)).astype(np.float16)
B = rng.standard_normal((256, 512)).astype(np.float16)


def assert_round_trip(f: Func) -> None:
    consts: dict[str, np.ndarray] = {}
    text = print_func(f, consts)
    assert print_func(parse(text, consts).verify()) == text


def line() -> int:
    return sys._getframe(1).f_lineno


def busy(p: Profile, ops: tuple[str, ...] = ("TLOAD", "TSTORE")) -> set[str]:
    """The cores that moved data (a core without grid points only runs its set-up)."""
    return {e.core for e in p.events if e.op in ops}


def headers(f, *args, machine: str = "ascend910b") -> list[str]:
    tile_ir = pto.jit(f, machine=machine).lower(*args).tile_ir
    return [ln.split("{")[0].strip() for ln in str(tile_ir).splitlines() if "kernel @" in ln]


def plain(x):
    return pto.exp(x) * 2.0 + 1.0


def vec_hinted(x):
    with pto.hint(tile=(8, 128), cores=5):
        y = pto.exp(x) * 2.0
    return y + 1.0  # unhinted: fuses into the hinted kernel and takes its hint


def test_vector_kernel_header_profile_and_results() -> None:
    assert headers(plain, X) == ["kernel @exp_mul_add grid(r=64) vec_tile(rows=1, cols=256)"]
    assert headers(vec_hinted, X) == [
        "kernel @exp_mul_add grid(r=8, c=2) cores(5) vec_tile(rows=8, cols=128)"
    ]
    p0 = pto.jit(plain).profile(X)
    p1 = pto.jit(vec_hinted).profile(X)
    assert len(busy(p0)) == 48
    # 16 tiles dealt round-robin to 5 vector cores: 4, 3, 3, 3, 3
    assert busy(p1) == {f"aiv{i}" for i in range(5)}
    loads = [sum(1 for e in p1.events if e.core == f"aiv{i}" and e.op == "TLOAD") for i in range(5)]
    assert loads == [4, 3, 3, 3, 3]
    assert p1.cycles > p0.cycles
    np.testing.assert_array_equal(p1.outputs[0].numpy(), p0.outputs[0].numpy())
    np.testing.assert_array_equal(pto.jit(vec_hinted)(X).numpy(), plain(X).numpy())


def test_cube_kernel_tile_cores_and_swizzle() -> None:
    def mm(a, b):
        return pto.relu(a @ b)

    def mm_hinted(a, b):
        with pto.hint(tile=([128, 128], [64, 256], [128, 128]), cores=3):
            y = a @ b
        return pto.relu(y)

    # unhinted: one wave of 24 tiles, with a partial last tile row (512 = 5 x 96 + 32)
    assert headers(mm, A, B) == [
        "kernel @matmul_relu grid(t=24) cube_tile(m=96, k=256, n=128, m0=96, k0=128, n0=128)"
        " on cluster"
    ]
    assert headers(mm_hinted, A, B) == [
        "kernel @matmul_relu grid(t=16) cores(3)"
        " cube_tile(m=128, k=256, n=128, m0=128, k0=64, n0=128) on cluster"
    ]
    p0, p1 = pto.jit(mm).profile(A, B), pto.jit(mm_hinted).profile(A, B)
    assert {c for c in busy(p1) if c.startswith("aic")} == {"aic0", "aic1", "aic2"}
    assert len({c for c in busy(p0) if c.startswith("aic")}) == 24
    np.testing.assert_allclose(p1.outputs[0].numpy(), p0.outputs[0].numpy(), rtol=2e-3, atol=2e-2)

    def swizzled(g):
        def f(a, b):
            with pto.hint(swizzle=g):
                return a @ b

        return f

    a, b = np.tile(A, (2, 1)), np.tile(B, (1, 2))
    jits = [pto.jit(swizzled(g)) for g in (1, 4)]
    texts = [str(j.lower(a, b).tile_ir) for j in jits]
    cycles = [j.profile(a, b, numerics=False).cycles for j in jits]
    assert texts[0] != texts[1] and cycles[0] != cycles[1]
    per_jit = pto.jit(lambda a, b: a @ b, tile=dict(swizzle=4))  # the same as the jit setting
    assert per_jit.profile(a, b, numerics=False).cycles == cycles[1]


def test_on_tiny_and_under_grad() -> None:
    def loss(x):
        with pto.hint(cores=1):
            y = pto.exp(x)
        return (y * y).sum()

    g = pto.jit(pto.grad(loss), machine="tiny")
    assert "hint(cores=1)" in str(g.lower(X).tensor_ir)
    p = g.profile(X)
    assert busy(p) <= {"aiv0"}
    np.testing.assert_allclose(p.outputs[0].numpy(), 2 * np.exp(2 * X), rtol=1e-5)


def test_hints_nest_and_print_and_round_trip() -> None:
    at = line() + 4

    def f(x):
        with pto.hint(tile=(8, 256), cores=4):
            y = pto.exp(x)
            with pto.hint(cores=2, swizzle=2):
                y = y * 2.0
        return y + 1.0

    lines = str(pto.make_graph(f)(X)).splitlines()
    assert lines[1].startswith("  %0: f32[64,256] = exp %x hint(cores=4, vec=(8, 256)) ")
    assert lines[1].endswith(f" # {HERE}:{at}")
    assert "mul %0, 2.0:f32 hint(cores=2, swizzle=2, vec=(8, 256))" in lines[2]
    assert lines[3].startswith("  %2: f32[64,256] = add %1, 1.0:f32   ")  # outside: no hint
    text = "\n".join(lines)
    assert_round_trip(pto.make_graph(f)(X))
    back = parse(text)
    assert back.eqns[1].hint == (("cores", 2), ("swizzle", 2), ("vec", (8, 256)))
    lowered = pto.jit(f, backend="interpret").lower(X)  # fused (on the NPU: a conflict)
    assert str(lowered.tensor_ir).count(" hint(") == 2  # the passes (and fusion) keep them
    assert_round_trip(lowered.tensor_ir)
    cube = pto.make_graph(lambda a, b: _cube_hinted(a, b))(A, B)
    assert "hint(cube=((128, 128), (64, 256), (128, 128)))" in str(cube)
    assert_round_trip(cube)


def _cube_hinted(a, b):
    with pto.hint(tile=([128, 128], [64, 256], [128, 128])):
        return a @ b


def test_unhinted_code_prints_as_before() -> None:
    assert "hint(" not in str(pto.make_graph(plain)(X))
    assert "core" not in str(pto.jit(plain).lower(X).tile_ir)


# ---- errors ---------------------------------------------------------------------------


def test_a_bad_tile_is_refused_at_the_with_line() -> None:
    with pytest.raises(pto.TileError) as e:
        at = line() + 1
        with pto.hint(tile=([128, 100], [64, 64], [64, 64])):
            pass
    assert "L1 size 100 is not a multiple of the L0 size 128" in str(e.value)
    assert f"{HERE}:{at}" in str(e.value)
    with pytest.raises(pto.TileError, match="must be positive integers"):
        pto.hint(tile=(0, 128))
    with pytest.raises(pto.TileError, match="cores=0 is not a positive integer"):
        pto.hint(cores=0)
    with pytest.raises(pto.TileError, match="swizzle=0 is not a positive integer"):
        pto.hint(swizzle=0)


def test_a_tile_that_does_not_fit_names_the_hint() -> None:
    at = line() + 4

    def f(x):
        with pto.hint(tile=(8, 96)):
            return pto.exp(x)

    with pytest.raises(pto.TileError) as e:
        pto.jit(f)(X)
    msg = str(e.value)
    assert "vector tile [8, 96] for kernel @exp" in msg
    assert "does not divide its 256 columns" in msg
    assert f"(with pto.hint at {HERE}:{at})" in msg


def test_differently_hinted_ops_get_kernels_of_their_own() -> None:
    def f(x):
        with pto.hint(cores=2):
            y = pto.exp(x)
        with pto.hint(cores=3):
            return y * 2.0

    assert headers(f, X) == [
        "kernel @exp grid(r=64) cores(2) vec_tile(rows=1, cols=256)",
        "kernel @mul grid(r=64) cores(3) vec_tile(rows=1, cols=256)",
    ]
    np.testing.assert_array_equal(pto.jit(f)(X).numpy(), (pto.exp(X) * 2.0).numpy())


def test_conflicting_hints_in_one_kernel_name_both_lines() -> None:
    q = rng.standard_normal((64, 32)).astype(np.float16)
    at = line() + 4

    def attention(q, k, v):  # one attention kernel: its two matmuls cannot differ
        with pto.hint(cores=2):
            s = q @ k.T
        p = pto.softmax(s)
        with pto.hint(cores=3):
            return p @ v

    with pytest.raises(pto.TileError) as e:
        pto.jit(attention)(q, q, q)
    msg = str(e.value)
    assert "ops fused into one kernel have conflicting hints" in msg
    # (k.T, on the same line as the first product, is in the kernel too: it reads k in place)
    assert f"transpose at {HERE}:{at} has cores=2, matmul at {HERE}:{at + 3} has cores=3" in msg


def test_more_cores_than_the_machine_has() -> None:
    def f(x):
        with pto.hint(cores=4):
            return pto.exp(x)

    with pytest.raises(pto.TileError, match="cores=4 for kernel @exp, but tiny has 2 vector"):
        pto.jit(f, machine="tiny")(X)


def test_a_cost_ordered_kernel_keeps_its_order_on_fewer_cores() -> None:
    # causal attention on 12 of 24 clusters: the grid is dealt to the first 12, costliest
    # first, so each gets the same number of K/V steps (no extra loop level either, which
    # would cost the kernel event ids it does not have)
    q = rng.standard_normal((1, 6, 1024, 64)).astype(np.float16)

    def f(q):
        with pto.hint(cores=12):
            return pto.scaled_dot_product_attention(q, q, q, causal=True)

    assert headers(f, q) == [
        "kernel @attention grid(b0=6, q=8) cost(q) cores(12) "
        "attn_tile(bq=128, bk=256, kc=128) on cluster"
    ]
    p = pto.jit(f).profile(q, numerics=False, trace=False)
    busy_m = [v for (c, pipe), v in p.busy.items() if c.startswith("aic") and pipe == "M"]
    working = sorted(v for v in busy_m if v > 100)
    assert len(working) == 12 and working[-1] / working[0] < 1.01


def test_read_ahead_off_for_one_product() -> None:
    """``pto.hint(tile=dict(read_ahead=False))`` keeps the vector cores of that matmul from
    reading its operands ahead; the other product still does, and the results agree."""
    a = np.zeros((1024, 1024), np.float16)
    cube = ([128, 128], [64, 256], [256, 256])
    big = rng.standard_normal((1024, 1024)).astype(np.float16)

    def two(x, w, v):
        with pto.hint(tile=dict(cube=cube, read_ahead=False)):
            y = pto.relu(x @ w)
        with pto.hint(tile=cube):
            z = pto.relu(x @ v)
        return y, z

    f = pto.jit(two)
    kernels = f.lower(a, a, a).tile_ir.kernels
    assert ["pfb" in str(k) for k in kernels if "cube_tile" in k.header()] == [False, True]
    y, z = f(big, big, big)
    np.testing.assert_array_equal(y.numpy(), z.numpy())
