"""Small models written against the public API, shared by the demo, the benchmarks and tests.

The LLaMA-style decoder block: RMSNorm, Q/K/V projections, rotary position embedding, causal
attention, output projection and residual, RMSNorm, SwiGLU MLP and residual. Its sizes come
from its arguments (``x`` is [seq, hidden], ``cos``/``sin`` are [seq, head_dim / 2]), so one
definition serves every size.

>>> import pypto as pto
>>> p = params(128, 256)
>>> cos, sin = rope_tables(64, 32)
>>> x = pto.random.normal(0, (64, 128))
>>> decoder(x, p, cos, sin).shape
(64, 128)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import pypto as pto
from pypto import dtypes as dt

__all__ = ["decoder", "decoder_jax", "params", "rope_tables"]


def rope_tables(seq: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The rotary embedding's cos and sin tables, [seq, head_dim / 2] in float32."""
    inv = 1.0 / (10000 ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    ang = np.arange(seq, dtype=np.float32)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def params(hidden: int, ffn: int, seed: int = 0, dtype: Any = None) -> dict[str, np.ndarray]:
    """The block's weights: unit norm gains and projections scaled by 1/√fan-in."""
    rng = np.random.default_rng(seed)
    np_dtype = np.float32 if dtype is None else dt.dtype(dtype).np

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / math.sqrt(shape[0])).astype(np_dtype)

    return {
        "g1": np.ones(hidden, np_dtype),
        "wq": w(hidden, hidden),
        "wk": w(hidden, hidden),
        "wv": w(hidden, hidden),
        "wo": w(hidden, hidden),
        "g2": np.ones(hidden, np_dtype),
        "w1": w(hidden, ffn),
        "w3": w(hidden, ffn),
        "w2": w(ffn, hidden),
    }


def _sizes(x: Any, cos: Any) -> tuple[int, int, int, int]:
    seq, hidden = x.shape
    head_dim = 2 * cos.shape[-1]
    return seq, hidden, hidden // head_dim, head_dim


def decoder(x: Any, p: dict[str, Any], cos: Any, sin: Any) -> Any:
    """The decoder block in pypto: ``x`` [seq, hidden], weights ``p`` as from :func:`params`."""
    seq, hidden, heads, head_dim = _sizes(x, cos)
    half = head_dim // 2

    def heads_of(t: Any) -> Any:
        return t.reshape(seq, heads, head_dim).transpose(1, 0, 2)

    def rope(t: Any) -> Any:
        t1, t2 = t[..., :half], t[..., half:]
        return pto.concat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1)

    h = pto.rms_norm(x, p["g1"])
    q = rope(heads_of(h @ p["wq"]))
    k = rope(heads_of(h @ p["wk"]))
    v = heads_of(h @ p["wv"])
    a = pto.scaled_dot_product_attention(q, k, v, causal=True)
    x = x + a.transpose(1, 0, 2).reshape(seq, hidden) @ p["wo"]
    h = pto.rms_norm(x, p["g2"])
    return x + (pto.silu(h @ p["w1"]) * (h @ p["w3"])) @ p["w2"]


def decoder_jax(x: Any, p: dict[str, Any], cos: Any, sin: Any) -> Any:
    """The same block in ``jax.numpy``, written independently of pypto's op table."""
    import jax
    import jax.numpy as jnp

    seq, hidden, heads, head_dim = _sizes(x, cos)
    half = head_dim // 2

    def rms(t: Any, g: Any) -> Any:
        return t * jax.lax.rsqrt((t * t).mean(-1, keepdims=True) + 1e-6) * g

    def rope(t: Any) -> Any:
        t1, t2 = t[..., :half], t[..., half:]
        return jnp.concatenate([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1)

    def heads_of(t: Any) -> Any:
        return t.reshape(seq, heads, head_dim).transpose(1, 0, 2)

    h = rms(x, p["g1"])
    q, k, v = rope(heads_of(h @ p["wq"])), rope(heads_of(h @ p["wk"])), heads_of(h @ p["wv"])
    s = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
    s = jnp.where(np.tril(np.ones((seq, seq), bool)), s, -jnp.inf)
    a = jax.nn.softmax(s, axis=-1) @ v
    x = x + a.transpose(1, 0, 2).reshape(seq, hidden) @ p["wo"]
    h = rms(x, p["g2"])
    return x + (jax.nn.silu(h @ p["w1"]) * (h @ p["w3"])) @ p["w2"]
