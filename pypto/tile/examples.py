"""Hand-written tile kernels that show the tile language at work.

* :func:`flash_attention` — ``softmax(q kᵀ · scale) v`` with an online softmax over K/V
  tiles: the cube core computes the scores and the ``P V`` products, the two vector cores keep
  the running row maximum and sum and the f32 accumulator; the score matrix never reaches GM.
* :func:`rms_norm_matmul` — ``rms_norm(x, g) @ w`` in one kernel: the vector cores normalize a
  block of rows chunk by chunk and hand each chunk to the cube core, which accumulates the
  product in L0C; the normalized activations never reach GM.

The tests and ``make bench`` compare them with the compiled tensor code they replace
(``pto.scaled_dot_product_attention``, ``pto.matmul(pto.rms_norm(x, g), w)``) and with JAX.

>>> import numpy as np, pypto as pto
>>> q = np.random.default_rng(0).standard_normal((2, 64, 32)).astype(np.float16)
>>> kt = np.swapaxes(q, -1, -2).copy()
>>> o = flash_attention(q, kt, q, bq=32, bk=32, scale=0.125)
>>> ref = pto.scaled_dot_product_attention(q, q, q, scale=0.125)
>>> bool(np.allclose(o.numpy(), ref.numpy(), atol=2e-3))
True
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from pypto import dtypes as dt
from pypto.tile import language as tl
from pypto.tile.language import Ref, ShapeDtype, kernel

__all__ = ["flash_attention", "rms_norm_matmul"]


def _attention_grid(q: Any, kt: Any, v: Any, *, bq: int = 64, **_: Any) -> tuple[int, int]:
    return (q.shape[0], q.shape[1] // bq)


def _attention_out(q: Any, kt: Any, v: Any, **_: Any) -> ShapeDtype:
    return ShapeDtype((*q.shape[:-1], v.shape[-1]), q.dtype)


def _attention_ref(q: Any, kt: Any, v: Any, *, scale: float = 1.0, **_: Any) -> Any:
    # as pto.scaled_dot_product_attention's reference: logits rounded to the inputs' dtype
    f32 = jnp.float32
    s = jnp.matmul(q, kt, preferred_element_type=f32).astype(q.dtype) * jnp.asarray(scale, q.dtype)
    p = jax.nn.softmax(s.astype(f32), axis=-1)
    return jnp.matmul(p.astype(q.dtype), v, preferred_element_type=f32).astype(q.dtype)


@kernel(grid=_attention_grid, out=_attention_out, reference=_attention_ref)
def flash_attention(
    q: Ref, kt: Ref, v: Ref, o: Ref, *, bq: int = 64, bk: int = 64, scale: float = 1.0
) -> None:
    """Attention over ``q [B, Lq, D]``, ``kt [B, D, Lk]`` (the keys transposed) and
    ``v [B, Lk, Dv]``; one grid point per batch entry and ``bq`` query rows."""
    b, i = tl.program_id(0), tl.program_id(1)
    d, lk, dv = q.shape[-1], kt.shape[-1], v.shape[-1]
    qt = tl.load(q, (b, i * bq, 0), (bq, d), space="L0A")
    m = tl.full((bq, 1), -1e30)  # running row maximum
    den = tl.zeros((bq, 1))  # running row sum of exp
    acc = tl.zeros((bq, dv))  # f32 accumulator of P V
    n = lk // bk
    # software pipelined: the cube computes the next tile's scores while the vector cores
    # run this tile's softmax (the last iteration recomputes tile 0's, unused)
    s_next = tl.matmul(qt, tl.load(kt, (b, 0, 0), (d, bk), space="L0B"))
    for j in tl.range(n):
        s = s_next.astype(q.dtype) * scale  # scores in the inputs' dtype, as JAX rounds them
        kj = tl.load(kt, (b, 0, (j + 1) % n * bk), (d, bk), space="L0B")
        tl.matmul(qt, kj, out=s_next)
        m_new = tl.maximum(m, s.max(axis=1).astype(dt.float32))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new.astype(q.dtype))
        den *= alpha
        den += p.sum(axis=1).astype(dt.float32)
        m[...] = m_new
        vj = tl.load(v, (b, j * bk, 0), (bk, dv), space="L0B")
        pv = tl.matmul(p, vj).astype(q.dtype)  # P to the cube core and P V back, as f16/bf16
        acc *= alpha
        acc += pv.astype(dt.float32)
    tl.store(o, (b, i * bq, 0), (acc / den).astype(o.dtype))


def _rms_grid(x: Any, g: Any, w: Any, *, bm: int = 128, bn: int = 256, **_: Any) -> Any:
    return (x.shape[0] // bm, w.shape[1] // bn)


def _rms_out(x: Any, g: Any, w: Any, **_: Any) -> ShapeDtype:
    return ShapeDtype((x.shape[0], w.shape[1]), x.dtype)


def _rms_ref(x: Any, g: Any, w: Any, *, eps: float = 1e-6, **_: Any) -> Any:
    f32 = jnp.float32
    xf = x.astype(f32)
    r = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    y = (xf * r * g.astype(f32)).astype(x.dtype)
    return jnp.matmul(y.astype(f32), w.astype(f32)).astype(x.dtype)


@kernel(grid=_rms_grid, out=_rms_out, reference=_rms_ref)
def rms_norm_matmul(
    x: Ref,
    g: Ref,
    w: Ref,
    o: Ref,
    *,
    bm: int = 128,
    bn: int = 256,
    bk: int = 128,
    eps: float = 1e-6,
) -> None:
    """``rms_norm(x, g) @ w`` for ``x [M, H]``, ``g [H]``, ``w [H, N]``: one grid point per
    ``[bm, bn]`` output tile, the hidden axis in ``bk`` chunks (two passes over ``x``: the sum
    of squares, then the normalized chunks the cube multiplies)."""
    i, jn = tl.program_id(0), tl.program_id(1)
    h = x.shape[1]
    ss = tl.zeros((bm, 1))
    wide = 128 if h % 128 == 0 else bk  # the first pass in wider chunks: fewer instructions
    for kk in tl.range(h // wide):
        xc = tl.load(x, (i * bm, kk * wide), (bm, wide)).astype(dt.float32)
        ss += (xc * xc).sum(axis=1)
    r = tl.rsqrt(ss * (1.0 / h) + eps)

    def chunk(kk: Any) -> Any:
        xc = tl.load(x, (i * bm, kk * bk), (bm, bk)).astype(dt.float32)
        gc = tl.load(g, (kk * bk,), (bk,)).astype(dt.float32)
        return (xc * r * gc).astype(x.dtype)  # handed to the cube core

    wt = tl.load(w, (0, jn * bn), (bk, bn), space="L0B")
    acc = tl.matmul(chunk(0), wt)
    for kk in tl.range(1, h // bk):
        wt = tl.load(w, (kk * bk, jn * bn), (bk, bn), space="L0B")
        tl.matmul(chunk(kk), wt, acc=acc)
    tl.store(o, (i * bm, jn * bn), acc)
