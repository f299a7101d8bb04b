"""Graph-mode costs on a LLaMA-style decoder block (seq 512, hidden 1024, 8 heads, SwiGLU 2816).

- ``trace+passes``: ``pto.jit(f, backend="interpret").lower(*args)`` — tracing to the Tensor
  IR and running the tensor passes (simplify, constant folding, CSE, DCE, fusion) — against
  ``jax.jit(f).lower(*args).compile()`` of the same function written in ``jax.numpy``, each
  from a fresh function object so no cache answers. Target: pypto faster (ratio < 1).
- the same for the gradient of a scalar loss over the block (``jit(grad(loss))``).
- ``interpret run``: the optimized graph run by ``backend="interpret"`` against a plain numpy
  implementation of the block. Target: at most 1.2 times.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import pypto as pto
from bench import Column, Group, Row, Settings, register
from bench.timing import Candidate, interleaved
from pypto import models

SEQ, HIDDEN, HEADS, FFN = 512, 1024, 8, 2816
HEAD_DIM = HIDDEN // HEADS
TIMES = "\N{MULTIPLICATION SIGN}"


def rope_tables() -> tuple[np.ndarray, np.ndarray]:
    return models.rope_tables(SEQ, HEAD_DIM)


def params(seed: int = 0) -> dict[str, np.ndarray]:
    return models.params(HIDDEN, FFN, seed)


# The block itself is shared with the demo: pypto/models.py.
decoder = models.decoder
decoder_jax = models.decoder_jax


def loss(p: dict[str, Any], x: Any, cos: Any, sin: Any) -> Any:
    return (decoder(x, p, cos, sin) ** 2).mean()


def loss_jax(p: dict[str, Any], x: Any, cos: Any, sin: Any) -> Any:
    return (decoder_jax(x, p, cos, sin) ** 2).mean()


# ---- the block in plain numpy ------------------------------------------------------------


def decoder_numpy(x: np.ndarray, p: dict[str, np.ndarray], cos: np.ndarray, sin: np.ndarray):
    def rms(t: np.ndarray, g: np.ndarray) -> np.ndarray:
        return t / np.sqrt((t * t).mean(-1, keepdims=True) + np.float32(1e-6)) * g

    def rope(t: np.ndarray) -> np.ndarray:
        half = HEAD_DIM // 2
        t1, t2 = t[..., :half], t[..., half:]
        return np.concatenate([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1)

    def heads(t: np.ndarray) -> np.ndarray:
        return t.reshape(SEQ, HEADS, HEAD_DIM).transpose(1, 0, 2)

    h = rms(x, p["g1"])
    q, k, v = rope(heads(h @ p["wq"])), rope(heads(h @ p["wk"])), heads(h @ p["wv"])
    s = q @ k.transpose(0, 2, 1) * np.float32(1 / math.sqrt(HEAD_DIM))
    s = np.where(np.tril(np.ones((SEQ, SEQ), bool)), s, np.float32(-np.inf))
    e = np.exp(s - s.max(-1, keepdims=True))
    a = (e / e.sum(-1, keepdims=True)) @ v
    x = x + a.transpose(1, 0, 2).reshape(SEQ, HIDDEN) @ p["wo"]
    h = rms(x, p["g2"])
    g = h @ p["w1"]
    return x + (g / (1 + np.exp(-g)) * (h @ p["w3"])) @ p["w2"]


def _rows(settings: Settings) -> Iterator[Row]:
    p = params()
    x = np.random.default_rng(1).standard_normal((SEQ, HIDDEN)).astype(np.float32)
    cos, sin = rope_tables()
    args = (x, p, cos, sin)
    pargs = (pto.tensor(x), {k: pto.tensor(v) for k, v in p.items()}, cos, sin)
    jargs = (jnp.asarray(x), {k: jnp.asarray(v) for k, v in p.items()}, cos, sin)
    repeats = 3 if settings.quick else 9

    # Sanity first: the three implementations must agree before their times mean anything.
    y = np.asarray(pto.jit(decoder, backend="interpret")(*pargs))
    ref = decoder_numpy(*args)
    agree = bool(np.allclose(y, ref, rtol=2e-3, atol=2e-3))

    def compile_case(name: str, pfn: Any, jfn: Any, target: str, eqns: int) -> Row:
        cands = {
            "pypto": Candidate(
                'pto.jit(f, backend="interpret").lower(*a)', {"pto": pto, "f": pfn, "a": pargs}
            ),
            "jax": Candidate(
                "jax.jit(lambda *b: g(*b)).lower(*a).compile()",
                {"jax": jax, "g": jfn, "a": jargs},
            ),
        }
        st = interleaved(cands, repeats, 1e-3, max_seconds=60.0, warmup=1, min_repeats=3)
        r = st["pypto"].median / st["jax"].median
        return {
            "benchmark": name,
            "pypto_s": st["pypto"].median,
            "other_s": st["jax"].median,
            "other": "jax.jit(...).lower().compile()",
            "ratio": r,
            "target": target,
            "met": r < 1.0,
            "eqns": eqns,
        }

    low = pto.jit(decoder, backend="interpret").lower(*pargs)
    yield compile_case(
        "decoder: trace + tensor passes", decoder, decoder_jax, "< 1", len(low.tensor_ir.eqns)
    )
    glow = pto.jit(pto.grad(loss), backend="interpret").lower(*(pargs[1], pargs[0], cos, sin))
    gp = (pargs[1], pargs[0], cos, sin)
    gj = (jargs[1], jargs[0], cos, sin)

    def gcase() -> Row:
        cands = {
            "pypto": Candidate(
                'pto.jit(pto.grad(f), backend="interpret").lower(*a)',
                {"pto": pto, "f": loss, "a": gp},
            ),
            "jax": Candidate(
                "jax.jit(jax.grad(lambda *b: g(*b))).lower(*a).compile()",
                {"jax": jax, "g": loss_jax, "a": gj},
            ),
        }
        st = interleaved(cands, repeats, 1e-3, max_seconds=60.0, warmup=1, min_repeats=3)
        r = st["pypto"].median / st["jax"].median
        return {
            "benchmark": "decoder gradient: trace + autodiff + tensor passes",
            "pypto_s": st["pypto"].median,
            "other_s": st["jax"].median,
            "other": "jax.jit(jax.grad(...)).lower().compile()",
            "ratio": r,
            "target": "< 1",
            "met": r < 1.0,
            "eqns": len(glow.tensor_ir.eqns),
        }

    yield gcase()
    compiled = pto.jit(decoder, backend="interpret")
    compiled(*pargs)
    cands = {
        "pypto": Candidate("f(*a)", {"f": compiled, "a": pargs}),
        "numpy": Candidate("g(*a)", {"g": decoder_numpy, "a": args}),
    }
    st = interleaved(cands, repeats * 2, 1e-3, max_seconds=60.0, warmup=1, min_repeats=3)
    r = st["pypto"].median / st["numpy"].median
    yield {
        "benchmark": "decoder: interpret-backend run" + ("" if agree else " (RESULTS DIFFER)"),
        "pypto_s": st["pypto"].median,
        "other_s": st["numpy"].median,
        "other": "plain numpy",
        "ratio": r,
        "target": f"{TIMES} ≤ 1.2",
        "met": agree and r <= 1.2,
        "eqns": len(low.tensor_ir.eqns),
    }


def _ms(v: Any) -> str:
    return f"{v * 1e3:.1f} ms"


register(
    Group(
        name="graph_compile",
        title="Graph mode on a decoder block (seq 512, hidden 1024)",
        columns=(
            Column("benchmark", "benchmark"),
            Column("equations", "eqns", str, "right"),
            Column("pypto", "pypto_s", _ms, "right"),
            Column("against", "other"),
            Column("time", "other_s", _ms, "right"),
            Column("ratio", "ratio", lambda v: f"{v:.3f}", "right"),
            Column("target", "target"),
            Column("met", "met", lambda v: "yes" if v else "no"),
        ),
        run=_rows,
        notes=("Medians of interleaved repetitions; each compile starts from a fresh function.",),
    )
)
