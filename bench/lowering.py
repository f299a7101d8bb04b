"""The compiled NPU path: roofline efficiency on ``ascend910b`` and compile time of a block.

Every function is staged with ``pto.jit`` (Tile IR → Block IR → PTO ISA) and simulated on the
``ascend910b`` machine with ``f.profile(*args, numerics=False, trace=False)`` (timing only).

- ``efficiency`` rows: the Profile's ``roofline_cycles / cycles`` for fp16 GEMMs (4096³ and the
  awkward 1000 x 3000 x 700), vector kernels on 8192 x 4096 (an elementwise chain, softmax,
  layer_norm, rms_norm), causal attention (batch 4, 32 heads, seq 2048, head dim 128) and a
  LLaMA-style decoder block forward (seq 2048, hidden 4096, 32 heads, SwiGLU 11008).
- ``fusion``: simulated cycles of the same block compiled with ``fuse=False`` (every op its own
  kernel) over those of the fused block, target ≥ 2; and of an elementwise chain's
  ``value_and_grad`` over the same under ``pto.checkpoint`` (the backward recomputes the
  intermediates instead of reading them back from HBM), target ≥ 2.
- ``baseline``: the gradient of the block's sum of squares with respect to every weight (the
  forward replayed, the backward op by op): what a training step costs. No target.
- ``compile``: the block lowered through all four levels (``pto.jit(f).lower(*args)`` then
  ``.isa``) from a fresh ``jit`` object each time, at seq 256 and seq 4096, medians of
  alternating runs; target < 2 s each and a ratio seq 4096 / seq 256 below 1.5. The ISA's
  ``static_size()`` (instructions in the program text) must be the same at both sizes when the
  block is compiled with the same cube and attention tiles (the automatic ones, which depend on the
  sizes, are shown beside).
- ``long program``: ``pto.random.gamma`` over 16 shapes, one vector kernel of about 20,000
  instructions, compiled the same way: instructions of program text per second, target
  ≥ 5,000/s.

A row whose lowering or simulation raises shows the error's first line and counts as not met.
``--quick`` runs the same rows on small shapes (a smoke test: those numbers mean little).
"""

from __future__ import annotations

import functools
import gc
import multiprocessing as mp
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

import pypto as pto
from bench import Column, Group, Row, Settings, register

MACHINE = "ascend910b"
TIMES = "\N{MULTIPLICATION SIGN}"
F16 = np.float16


@dataclass(frozen=True)
class Sizes:
    """The shapes of one mode (full, or quick for the smoke test)."""

    gemm: int
    awkward: tuple[int, int, int]
    vector: tuple[int, int]
    attention: tuple[int, int, int, int]
    """batch, heads, seq, head dim."""
    block: tuple[int, int, int, int]
    """seq, hidden, heads, ffn."""
    compile_seqs: tuple[int, int]
    compile_runs: int
    pinned_cube: tuple[list[int], list[int], list[int]]
    """cube tile shapes fixed for both sizes in the static-size row (m, k, n)"""
    pinned_attn: tuple[int, int, int]
    """attention tiles (bq, bk, g) fixed for both sizes in the static-size row"""
    decode: tuple[int, int, int, int, int] = (1, 32, 1, 4096, 128)
    """decoding attention: batch, heads, query rows, keys, head dim."""
    vocab: tuple[int, int, int] = (256, 32000, 50)
    """top_k over a vocabulary: rows, vocabulary, k."""
    conv: tuple[int, int, int, int] = (8, 56, 64, 64)
    """a 3x3 convolution, NHWC: batch, height = width, in and out features."""


FULL = Sizes(
    gemm=4096,
    awkward=(1000, 3000, 700),
    vector=(8192, 4096),
    attention=(4, 32, 2048, 128),
    block=(2048, 4096, 32, 11008),
    compile_seqs=(256, 4096),
    compile_runs=7,
    pinned_cube=([128, 128], [128, 256], [128, 128]),
    pinned_attn=(128, 128, 2),
)
QUICK = Sizes(
    gemm=256,
    awkward=(100, 300, 70),
    vector=(256, 512),
    attention=(1, 2, 128, 64),
    block=(128, 256, 2, 704),
    compile_seqs=(64, 256),
    compile_runs=2,
    pinned_cube=([32, 32], [32, 64], [32, 32]),
    pinned_attn=(32, 32, 2),
    decode=(1, 2, 1, 256, 64),
    vocab=(16, 3000, 5),
    conv=(1, 16, 16, 16),
)


def shape_text(*dims: int) -> str:
    return TIMES.join(str(d) for d in dims)


def error_line(e: BaseException) -> str:
    """``Type: first line of the message`` (what a row shows instead of a number)."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


# ---- the functions -----------------------------------------------------------------------


def elementwise(x: Any) -> Any:
    return pto.gelu(x * 1.5 + 0.5) * x


def chain(x: Any) -> Any:
    y = pto.tanh(x) * pto.sigmoid(x * 2.0)
    return pto.exp(-y * y) + y


def chain_loss(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``log(sum(f(x)))``: the backward scales by ``1 / sum``, so it cannot run in the
    forward's kernel (a plain sum's gradient does: its cotangent is a constant)."""
    return lambda v: pto.log(f(v).astype(pto.float32).sum())


def chain_grad(x: Any) -> Any:
    """The chain's value and gradient: the backward needs the forward's intermediates."""
    return pto.value_and_grad(chain_loss(chain))(x)


def chain_grad_checkpointed(x: Any) -> Any:
    """The same with the chain under ``pto.checkpoint``: the backward recomputes them."""
    return pto.value_and_grad(chain_loss(pto.checkpoint(chain)))(x)


def softmax(x: Any) -> Any:
    return pto.softmax(x, axis=-1)


def layer_norm(x: Any, g: Any, b: Any) -> Any:
    return pto.layer_norm(x, g, b)


def rms_norm(x: Any, g: Any) -> Any:
    return pto.rms_norm(x, g)


def gemm(a: Any, b: Any) -> Any:
    return a @ b


def attention(q: Any, k: Any, v: Any) -> Any:
    return pto.scaled_dot_product_attention(q, k, v, causal=True)


def decoding(q: Any, k: Any, v: Any) -> Any:
    return pto.scaled_dot_product_attention(q, k, v)


def grouped_attention(q: Any, k: Any, v: Any) -> Any:
    return pto.dot_product_attention(q, k, v, is_causal=True)


def biased_attention(q: Any, k: Any, v: Any, bias: Any) -> Any:
    return pto.dot_product_attention(q, k, v, bias=bias, is_causal=True)


def max_pool(x: Any) -> Any:
    return pto.lax.reduce_window(x, -np.inf, pto.maximum, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")


def conv3x3(x: Any, w: Any) -> Any:
    dn = ("NHWC", "HWIO", "NHWC")
    return pto.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn)


def conv3x3_grads(x: Any, w: Any) -> Any:
    """The convolution's gradients with respect to the input and the kernel (a training
    step's backward), of a float32 sum of squares."""

    def loss(x: Any, w: Any) -> Any:
        return (conv3x3(x, w).astype(pto.float32) ** 2).sum()

    return pto.grad(loss, argnums=(0, 1))(x, w)


def flip(x: Any) -> Any:
    return pto.flip(x, -1)


def cumsum(x: Any) -> Any:
    return pto.cumsum(x, -1)


def random_uniform(key: Any, x: Any) -> Any:
    """jax.random.uniform's floats of x's shape from a traced key (the Threefry hash)."""
    return pto.random.uniform(key, x.shape)


def argsort(x: Any) -> Any:
    return pto.argsort(x, -1)


def top_k(x: Any, k: int) -> Any:
    return pto.top_k(x, k)


def make_block(seq: int, hidden: int, heads: int) -> Callable[..., Any]:
    """The decoder block of ``bench/graph_compile.py`` (RMSNorm, Q/K/V projections, rotary
    embedding, causal attention, output projection and residual, RMSNorm, SwiGLU MLP and
    residual) for any size; ``cos``/``sin`` are [seq, head_dim / 2]."""
    head_dim = hidden // heads
    half = head_dim // 2

    def rope(t: Any, cos: Any, sin: Any) -> Any:
        t1, t2 = t[..., :half], t[..., half:]
        return pto.concat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1)

    def split_heads(t: Any) -> Any:
        return t.reshape(seq, heads, head_dim).transpose(1, 0, 2)

    def decoder(x: Any, p: dict[str, Any], cos: Any, sin: Any) -> Any:
        h = pto.rms_norm(x, p["g1"])
        q = rope(split_heads(h @ p["wq"]), cos, sin)
        k = rope(split_heads(h @ p["wk"]), cos, sin)
        v = split_heads(h @ p["wv"])
        a = pto.scaled_dot_product_attention(q, k, v, causal=True)
        x = x + a.transpose(1, 0, 2).reshape(seq, hidden) @ p["wo"]
        h = pto.rms_norm(x, p["g2"])
        return x + (pto.silu(h @ p["w1"]) * (h @ p["w3"])) @ p["w2"]

    return decoder


def block_args(seq: int, hidden: int, heads: int, ffn: int) -> tuple[Any, ...]:
    """fp16 arguments of the block. Timing-only runs never read the values: zeros will do."""
    head_dim = hidden // heads
    z = np.zeros
    p = {
        "g1": np.ones(hidden, F16),
        "wq": z((hidden, hidden), F16),
        "wk": z((hidden, hidden), F16),
        "wv": z((hidden, hidden), F16),
        "wo": z((hidden, hidden), F16),
        "g2": np.ones(hidden, F16),
        "w1": z((hidden, ffn), F16),
        "w3": z((hidden, ffn), F16),
        "w2": z((ffn, hidden), F16),
    }
    inv = 1.0 / (10000 ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    ang = np.arange(seq, dtype=np.float32)[:, None] * inv[None, :]
    cos, sin = np.cos(ang).astype(F16), np.sin(ang).astype(F16)
    return z((seq, hidden), F16), p, cos, sin


# ---- measuring ---------------------------------------------------------------------------


def _pipes(util: dict[str, float]) -> str:
    """Busy fraction of every pipe kind that did anything, busiest first."""
    busy = sorted(((v, k) for k, v in util.items() if v >= 0.005), reverse=True)
    return " ".join(f"{k} {v:.2f}" for v, k in busy)


def _us(cycles: float, hz: float) -> float:
    return cycles / hz * 1e6


def _measure_profile(
    fn: Callable[..., Any], args: tuple[Any, ...], fuse: bool, useful_flops: float | None
) -> Row:
    """Compile (timed once) and simulate (timing only, timed once): the row's measurements."""
    gc.collect()
    t0 = time.perf_counter()
    f = pto.jit(fn, machine=MACHINE, fuse=fuse)
    low = f.lower(*args)
    _ = low.isa
    t1 = time.perf_counter()
    prof = f.profile(*args, numerics=False, trace=False)
    wall = time.perf_counter() - t1
    hz = prof.machine.hz
    out: Row = dict(
        compile_s=t1 - t0,
        static_size=low.isa.static_size(),
        sim_wall_s=wall,
        efficiency=prof.efficiency,
        cycles=prof.cycles,
        roofline_cycles=prof.roofline_cycles,
        simulated_us=_us(prof.cycles, hz),
        roofline_us=_us(prof.roofline_cycles, hz),
        bound=prof.bound,
        bounds={k: _us(v, hz) for k, v in prof.bounds.items()},
        utilization=dict(prof.utilization),
        pipes=_pipes(prof.utilization),
        hbm_bytes=prof.hbm_bytes,
        flops=prof.flops,
        tflops=prof.tflops,
        l2_hit_rate=prof.l2_hit_rate,
        instructions=prof.instructions,
    )
    if useful_flops is not None:
        tflops = useful_flops / prof.seconds / 1e12
        out["useful_tflops"] = tflops
        out["cube_peak_fraction"] = tflops / prof.machine.cube_tflops_f16
    return out


def _child(conn: Any, work: Callable[[], Row]) -> None:
    try:
        conn.send(("ok", work()))
    except BaseException as e:
        conn.send(("error", error_line(e)))
    finally:
        conn.close()


def run_limited(work: Callable[[], Row], timeout: float | None) -> tuple[str, Any]:
    """``("ok", row)`` or ``("error", first line)``: ``work()`` in this process, or, with a
    ``timeout``, in a forked child that is killed (by its pid) when it runs longer."""
    if timeout is None:
        try:
            return "ok", work()
        except Exception as e:  # a lowering not written yet: the table still prints
            return "error", error_line(e)
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, work), daemon=True)
    with warnings.catch_warnings():  # JAX warns that fork and its threads may deadlock
        warnings.simplefilter("ignore", RuntimeWarning)
        proc.start()
    send.close()
    try:
        if recv.poll(timeout):
            status, value = recv.recv()
            return status, value
        return "error", f"timed out: still running after {timeout:.0f} s (child killed)"
    except EOFError:
        proc.join(5)
        return "error", f"the measuring process died (exit code {proc.exitcode})"
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join()


def profile_row(
    name: str,
    shape: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    target: float,
    *,
    fuse: bool = True,
    useful_flops: float | None = None,
    timeout: float | None = None,
) -> Row:
    """One efficiency row; a failing (or, with ``timeout``, too slow) lowering or simulation
    gives a row with ``error`` set and ``met`` False.

    ``useful_flops`` (a GEMM's 2mkn) adds the achieved TFLOPS and the fraction of the cube
    peak counted without padding (the roofline counts the cube work the program issues)."""
    row: Row = {
        "benchmark": name,
        "shape": shape,
        "target": f"≥ {target:g}",
        "met": False,
        "kind": "efficiency",
    }
    t0 = time.perf_counter()
    status, value = run_limited(lambda: _measure_profile(fn, args, fuse, useful_flops), timeout)
    if status != "ok":
        row.update(error=value, result=value, wall_s=time.perf_counter() - t0)
        return row
    row.update(value)
    row.update(result=f"{value['efficiency']:.3f}", met=value["efficiency"] >= target)
    return row


def compile_times(
    fns: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]], runs: int, warm_up: bool = True
) -> dict[str, list[float]]:
    """Seconds of ``pto.jit(fn).lower(*args).isa`` from a fresh jit object, ``runs`` times per
    candidate, the candidates alternating (order reversed every other round); first one
    untimed compile of each unless the caller has made one (imports, op-table caches)."""
    names = list(fns)
    for n in names if warm_up else ():
        fn, args = fns[n]
        _ = pto.jit(fn, machine=MACHINE).lower(*args).isa
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(runs):
        for n in names if r % 2 == 0 else reversed(names):
            fn, args = fns[n]
            gc.collect()
            t0 = time.perf_counter()
            _ = pto.jit(fn, machine=MACHINE).lower(*args).isa
            times[n].append(time.perf_counter() - t0)
    return times


def _compile_rows(sizes: Sizes) -> Iterator[Row]:
    _, hidden, heads, ffn = sizes.block
    small, large = sizes.compile_seqs
    cases: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {}
    sizes_of: dict[str, int] = {}
    pinned_of: dict[str, int] = {}
    err: str | None = None
    pinned = dict(cube=sizes.pinned_cube, attn=sizes.pinned_attn)
    for s in (small, large):
        fn, args = make_block(s, hidden, heads), block_args(s, hidden, heads, ffn)
        try:
            sizes_of[f"seq {s}"] = pto.jit(fn, machine=MACHINE).lower(*args).isa.static_size()
            low = pto.jit(fn, machine=MACHINE, tile=pinned).lower(*args)
            pinned_of[f"seq {s}"] = low.isa.static_size()
        except Exception as e:
            err = error_line(e)
            break
        cases[f"seq {s}"] = (fn, args)
    base = {"kind": "compile", "met": False}
    if err is not None:
        for s in (small, large):
            yield {
                **base,
                "benchmark": "decoder block: compile, all four levels",
                "shape": f"seq {s}, hidden {hidden}",
                "result": err,
                "error": err,
                "target": "< 2 s",
            }
        yield {
            **base,
            "benchmark": "decoder block: compile time ratio",
            "shape": f"seq {large} / seq {small}",
            "result": err,
            "error": err,
            "target": "< 1.5",
        }
        yield {
            **base,
            "benchmark": "decoder block: ISA static size (instructions)",
            "shape": f"seq {small} / seq {large}",
            "result": err,
            "error": err,
            "target": "equal",
        }
        return
    times = compile_times(cases, sizes.compile_runs)
    med = {k: statistics.median(v) for k, v in times.items()}
    for s in (small, large):
        k = f"seq {s}"
        yield {
            **base,
            "benchmark": "decoder block: compile, all four levels",
            "shape": f"seq {s}, hidden {hidden}",
            "result": f"{med[k]:.3f} s",
            "median_s": med[k],
            "samples_s": times[k],
            "static_size": sizes_of[k],
            "target": "< 2 s",
            "met": med[k] < 2.0,
        }
    ratio = med[f"seq {large}"] / med[f"seq {small}"]
    yield {
        **base,
        "benchmark": "decoder block: compile time ratio",
        "shape": f"seq {large} / seq {small}",
        "result": f"{ratio:.2f}",
        "ratio": ratio,
        "target": "< 1.5",
        "met": ratio < 1.5,
    }
    # The automatic tile shapes depend on the sizes (a smaller problem can double-buffer its
    # accumulator, say), and the code with them; with the same tile shapes it must not change.
    a, b = pinned_of[f"seq {small}"], pinned_of[f"seq {large}"]
    da, db = sizes_of[f"seq {small}"], sizes_of[f"seq {large}"]
    yield {
        **base,
        "benchmark": "decoder block: ISA static size (instructions)",
        "shape": f"seq {small} / seq {large}",
        "result": f"{a:,} / {b:,} (automatic tiles: {da:,} / {db:,})",
        "static_sizes": [a, b],
        "static_sizes_auto": [da, db],
        "target": "equal with the same tiles",
        "met": a == b,
    }


def without_progress(rows: Iterator[Row]) -> Iterator[Row]:
    """``rows`` with pypto's progress bars off: they (stderr, after a second) would interleave
    with the runner's lines and cost time inside the measured compiles."""
    saved = os.environ.get("PYPTO_PROGRESS")
    os.environ["PYPTO_PROGRESS"] = "0"
    try:
        yield from rows
    finally:
        if saved is None:
            del os.environ["PYPTO_PROGRESS"]
        else:
            os.environ["PYPTO_PROGRESS"] = saved


def _rows(settings: Settings) -> Iterator[Row]:
    return without_progress(_measure(settings))


def sim_timeout(settings: Settings) -> float | None:
    """Seconds one row may take (compile and simulation) before its child process is killed:
    ``PYPTO_BENCH_TIMEOUT`` (``0``: no limit, in-process), else 1200 s; quick mode runs
    in-process with no limit."""
    env = os.environ.get("PYPTO_BENCH_TIMEOUT")
    if env is not None:
        return float(env) or None
    return None if settings.quick else 1200.0


def _measure(settings: Settings) -> Iterator[Row]:
    sz = QUICK if settings.quick else FULL
    limit = sim_timeout(settings)

    def row(
        name: str,
        shape: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        target: float,
        **kw: Any,
    ) -> Row:
        return profile_row(name, shape, fn, args, target, timeout=limit, **kw)

    n = sz.gemm
    yield row(
        "fp16 GEMM",
        shape_text(n, n, n),
        gemm,
        (np.zeros((n, n), F16), np.zeros((n, n), F16)),
        0.85,
        useful_flops=2.0 * n**3,
    )
    m, k, n = sz.awkward
    yield row(
        "fp16 GEMM, awkward",
        shape_text(m, k, n),
        gemm,
        (np.zeros((m, k), F16), np.zeros((k, n), F16)),
        0.6,
        useful_flops=2.0 * m * k * n,
    )
    r, c = sz.vector
    x = np.zeros((r, c), F16)
    g, b = np.ones(c, F16), np.zeros(c, F16)
    vec_shape = shape_text(r, c)
    yield row("elementwise gelu(x·1.5+0.5)·x", vec_shape, elementwise, (x,), 0.85)
    yield row("softmax (last axis)", vec_shape, softmax, (x,), 0.85)
    yield row("layer_norm", vec_shape, layer_norm, (x, g, b), 0.85)
    yield row("rms_norm", vec_shape, rms_norm, (x, g), 0.85)
    # a reversed last axis (a TGATHER per tile) and a scan (log-step, in UB): no targets
    # and sorts (TSORT32 and TMRGSORT in UB): no targets
    for name, fn in (
        ("flip (last axis)", flip),
        ("cumsum (last axis)", cumsum),
        ("argsort (last axis)", argsort),
    ):
        base = row(name, vec_shape, fn, (x,), 0.0)
        base.update(target="", met=None, kind="baseline")
        yield base
    # Threefry-2x32 (20 rounds of wrapping adds, rotations and xors) per element: no target
    base = row(
        "random.uniform (Threefry-2x32)",
        vec_shape,
        random_uniform,
        (np.zeros(2, np.int32), x),
        0.0,
    )
    base.update(target="", met=None, kind="baseline")
    yield base
    # an elementwise chain's value and gradient, its intermediates kept for the backward and
    # then recomputed there (pto.checkpoint): the ratio of the two times has the target
    kept = row("elementwise chain, value_and_grad", vec_shape, chain_grad, (x,), 0.0)
    kept.update(target="", met=None, kind="baseline")
    yield kept
    recomputed = row(
        "elementwise chain, value_and_grad, checkpointed",
        vec_shape,
        chain_grad_checkpointed,
        (x,),
        0.0,
    )
    recomputed.update(target="", met=None, kind="baseline")
    yield recomputed
    yield _ratio_row(
        "checkpoint speed-up (kept / recomputed cycles)", vec_shape, kept, recomputed, 2.0
    )
    del x
    r, v, k = sz.vocab
    base = row(
        "top_k (last axis)",
        f"{shape_text(r, v)}, k {k}",
        functools.partial(top_k, k=k),
        (np.zeros((r, v), F16),),
        0.0,
    )
    base.update(target="", met=None, kind="baseline")
    yield base
    bb, h, s, d = sz.attention
    q = np.zeros((bb, h, s, d), F16)
    # useful work: q kᵀ and p v over the causal half (the roofline counts the diagonal tiles'
    # masked half too, as the cube issues it)
    yield row(
        "causal attention",
        f"b{bb} h{h} s{s} d{d}",
        attention,
        (q, q, q),
        0.6,
        useful_flops=2.0 * bb * h * s * s * d,
    )
    # the same in jax.nn's [B, T, N, H] layout with a quarter as many key/value heads
    # (grouped-query attention): no target
    hk = max(1, h // 4)  # (the quick shapes' two heads share one)
    q, kv = np.zeros((bb, s, h, d), F16), np.zeros((bb, s, hk, d), F16)
    gqa = row(
        "causal attention, jax.nn layout, grouped heads",
        f"b{bb} h{h}/{hk} s{s} d{d}",
        grouped_attention,
        (q, kv, kv),
        0.0,
        useful_flops=2.0 * bb * h * s * s * d,
    )
    gqa.update(target="", met=None, kind="baseline")
    yield gqa
    # with a bias per head over every batch row (ALiBi-like, [1, N, T, S]): the vector cores
    # add its tiles in the same kernel (no target)
    q, kv = np.zeros((bb, s, h, d), F16), np.zeros((bb, s, h, d), F16)
    bias = np.zeros((1, h, s, s), F16)
    biased = row(
        "causal attention with a bias, jax.nn layout",
        f"b{bb} h{h} s{s} d{d}, bias 1x{h}x{s}x{s}",
        biased_attention,
        (q, kv, kv, bias),
        0.0,
        useful_flops=2.0 * bb * h * s * s * d,
    )
    biased.update(target="", met=None, kind="baseline")
    yield biased
    del q, kv, bias
    # decoding: one query row per head against a long cache, HBM-bound (no target)
    bb, h, lq, lk, d = sz.decode
    q, kv = np.zeros((bb, h, lq, d), F16), np.zeros((bb, h, lk, d), F16)
    dec = row("attention, decoding", f"b{bb} h{h} q{lq} k{lk} d{d}", decoding, (q, kv, kv), 0.0)
    dec.update(target="", met=None, kind="baseline")
    yield dec
    del q, kv
    # a 3x3 convolution as one matmul over shifted rows of the padded input, and its
    # gradients (three such products' flops): no targets
    nb, hw, ci, co = sz.conv
    conv_args = (np.zeros((nb, hw, hw, ci), F16), np.zeros((3, 3, ci, co), F16))
    conv_flops = 2.0 * nb * hw * hw * ci * co * 9
    for name, fn, flops in (
        ("3x3 convolution, NHWC, SAME", conv3x3, conv_flops),
        ("3x3 convolution, gradients (input and kernel)", conv3x3_grads, 3 * conv_flops),
    ):
        shape = f"{shape_text(nb, hw, hw, ci)}, {co} out"
        conv = row(name, shape, fn, conv_args, 0.0, useful_flops=flops)
        conv.update(target="", met=None, kind="baseline")
        yield conv
    pool = row(
        "3x3/2 max pooling, NHWC, SAME",
        shape_text(nb, hw, hw, ci),
        max_pool,
        (np.zeros((nb, hw, hw, ci), F16),),
        0.0,
    )
    pool.update(target="", met=None, kind="baseline")
    yield pool
    seq, hidden, heads, ffn = sz.block
    block = make_block(seq, hidden, heads)
    args = block_args(seq, hidden, heads, ffn)
    bshape = f"seq {seq}, hidden {hidden}, ffn {ffn}"
    fused = row("decoder block forward", bshape, block, args, 0.6)
    yield fused
    unfused = row("decoder block forward, fuse=False", bshape, block, args, 0.0, fuse=False)
    unfused.update(target="", met=None, kind="baseline")
    yield unfused
    yield _ratio_row("fusion speed-up (fuse=False / fused cycles)", bshape, unfused, fused, 2.0)
    # what training costs: the gradient of a sum of squares of the block with respect to every
    # weight (forward replayed, backward op by op; no target)
    grad = row("decoder block gradient (all weights)", bshape, block_grad(block), args, 0.0)
    grad.update(target="", met=None, kind="baseline")
    yield grad
    yield from _compile_rows(sz)
    yield from _long_program_row(1 if settings.quick else sz.compile_runs)


def _ratio_row(name: str, shape: str, slow: Row, fast: Row, target: float) -> Row:
    """The simulated cycles of ``slow`` over those of ``fast``, against ``target``."""
    out: Row = {
        "benchmark": name,
        "shape": shape,
        "target": f"≥ {target:g}{TIMES}",
        "met": False,
        "kind": "fusion",
    }
    if "error" in slow or "error" in fast:
        out["result"] = out["error"] = fast.get("error") or slow.get("error")
    else:
        speedup = slow["cycles"] / fast["cycles"]
        out.update(result=f"{speedup:.2f}{TIMES}", ratio=speedup, met=speedup >= target)
    return out


LONG_PROGRAM_RATE = 5_000.0
"""Target of the long-program compile row: instructions of program text per second."""


def _long_program_row(runs: int) -> Iterator[Row]:
    """``jax.random.gamma`` over 16 shapes: Marsaglia and Tsang's loops unrolled into one long
    vector kernel (about 20,000 instructions and as many tiles to place), compiled through
    all four levels: what a long straight-line program costs to compile. The rate counts the
    program text's instructions."""
    a = np.linspace(0.3, 4.0, 16).astype(np.float32)
    key = pto.random.key(0)

    def gamma(k: Any, x: Any) -> Any:
        return pto.random.gamma(k, x)

    base: Row = {
        "kind": "compile",
        "benchmark": "long program: compile, all four levels",
        "shape": "random.gamma, 16 shapes",
        "target": f"≥ {LONG_PROGRAM_RATE:,.0f} instr/s",
        "met": False,
    }
    try:
        size = pto.jit(gamma, machine=MACHINE).lower(key, a).isa.static_size()  # (warm)
        times = compile_times({"gamma": (gamma, (key, a))}, runs, warm_up=False)["gamma"]
    except Exception as e:
        yield {**base, "result": error_line(e), "error": error_line(e)}
        return
    med = statistics.median(times)
    rate = size / med
    yield {
        **base,
        "result": f"{rate:,.0f} instr/s ({size:,} in {med:.2f} s)",
        "median_s": med,
        "samples_s": times,
        "static_size": size,
        "instr_per_s": rate,
        "met": rate >= LONG_PROGRAM_RATE,
    }


def block_grad(block: Callable[..., Any]) -> Callable[..., Any]:
    """``pto.grad`` of ``sum(block(...)²)`` in float32 with respect to the weights."""

    def loss(x: Any, p: dict[str, Any], cos: Any, sin: Any) -> Any:
        return (block(x, p, cos, sin).astype(pto.float32) ** 2).sum()

    return pto.grad(loss, argnums=1)


def _opt(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    return lambda v: "" if v is None else fmt(v)


def _us_text(v: float) -> str:
    return f"{v:,.0f} µs" if v >= 100 else f"{v:.3g} µs"


def _met(v: Any) -> str:
    return "" if v is None else ("yes" if v else "no")


register(
    Group(
        name="lowering",
        title=f"The compiled NPU path on {MACHINE}: roofline efficiency and compile time",
        columns=(
            Column("benchmark", "benchmark"),
            Column("shape", "shape"),
            Column("result", "result", _opt(str), "right"),
            Column("target", "target"),
            Column("met", "met", _met),
            Column("simulated", "simulated_us", _opt(_us_text), "right"),
            Column("roofline", "roofline_us", _opt(_us_text), "right"),
            Column("bound", "bound", _opt(str)),
            Column("pipes busy", "pipes", _opt(str)),
            Column("compile", "compile_s", _opt(lambda v: f"{v:.2f} s"), "right"),
            Column("sim wall", "sim_wall_s", _opt(lambda v: f"{v:.1f} s"), "right"),
        ),
        run=_rows,
        notes=(
            "result: efficiency = roofline cycles / simulated cycles (timing-only profile), "
            "or the row's ratio or time; pipes busy: busy fraction per pipe kind, averaged "
            "over the cores that have the pipe.",
            "compile rows: medians of alternating fresh `pto.jit(f).lower(*args).isa` runs; "
            "sim wall: wall time of the timing-only simulation.",
        ),
    )
)

__all__ = [
    "block_args",
    "compile_times",
    "error_line",
    "make_block",
    "profile_row",
    "run_limited",
]
