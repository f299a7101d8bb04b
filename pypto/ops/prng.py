"""JAX's random numbers, bit for bit: keys, ``split``, ``fold_in`` and the samplers of
``jax.random`` over the Threefry-2x32 counter hash, written with pypto's integer ops.

A key is an ``int32[2]`` tensor holding the two 32-bit words of ``jax.random.PRNGKey``'s
``uint32[2]`` (pypto has no unsigned dtypes: the bits are the same). Every function takes
such a key, a JAX key (legacy or typed) or a numpy ``uint32[2]``. The hash is twenty rounds
of wrapping adds, rotations and xors, so under ``pto.jit`` a traced key is hashed by the
vector cores like any integer chain; the bits equal JAX's (``jax_threefry_partitionable``,
its default: element ``i`` hashes the counter pair ``(0, i)`` and xors the two words), and
so do the uniform floats in [0, 1) made from them, and the integer samplers (``randint``,
``bernoulli``, ``categorical``, ``permutation``, ``choice``). Samplers that apply a
function to the floats (``normal``'s ``erf_inv``, ``gumbel``'s logarithms) agree within
pypto's tolerance of those functions.

>>> import pypto as pto
>>> k = pto.random.key(0)
>>> pto.random.uniform(k, (3,)).numpy()
array([0.947667  , 0.9785799 , 0.33229148], dtype=float32)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError, ShapeError
from pypto.ops import activations, api, composite, lax_ops, numpy_lib, special

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA  # Threefry's key-schedule constant


def _key_bits(op: str, key: Any) -> Any:
    """``key`` as an ``int32[2]`` value: a pypto key, or a JAX key (typed keys through
    ``jax.random.key_data``) or ``uint32[2]`` array, whose bits it keeps."""
    v = _key_value(op, key)
    if v.dtype is not dt.int32 or tuple(v.shape) != (2,):
        raise ShapeError(
            f"needs one key, int32[2], got {api._aval(v)}",
            op=op,
            hint="make keys with pto.random.key(seed) and pto.random.split(key, n); "
            "index a batch of keys (keys[i]) or map over it with pto.vmap",
        )
    return v


def _word(v: Any, i: int) -> Any:
    return api.getitem(v, i)


def _pair(op: str, key: Any) -> tuple[Any, Any]:
    """The two keys of ``split(key)``."""
    keys = split(_key_bits(op, key))
    return api.getitem(keys, 0), api.getitem(keys, 1)


def _rotl(x: Any, r: int) -> Any:
    """``x`` rotated left by ``r`` bits (the right shift's sign copies masked off)."""
    return api.bitwise_or(
        api.left_shift(x, r), api.bitwise_and(api.right_shift(x, 32 - r), (1 << r) - 1)
    )


def threefry2x32(k0: Any, k1: Any, x0: Any, x1: Any) -> tuple[Any, Any]:
    """The Threefry-2x32 hash (20 rounds) of the counter pairs ``(x0, x1)`` under the key
    ``(k0, k1)``: int32 words whose wrapping adds are uint32's."""
    ks = (k0, k1, api.bitwise_xor(api.bitwise_xor(k0, k1), _PARITY))
    x0, x1 = api.add(x0, ks[0]), api.add(x1, ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = api.add(x0, x1)
            x1 = api.bitwise_xor(x0, _rotl(x1, r))
        x0 = api.add(x0, ks[(i + 1) % 3])
        x1 = api.add(api.add(x1, ks[(i + 2) % 3]), i + 1)
    return x0, x1


def _flat_index(shape: tuple[int, ...]) -> Any:
    """Each element's flat index (int32, wrapping past 2³¹ as uint32's bits do), as a row
    of column numbers plus a column of row starts: two small constants the vector cores
    broadcast, not one of the whole shape read from memory."""
    if len(shape) < 2:
        return api.asvalue(
            np.arange(math.prod(shape), dtype=np.int64).astype(np.int32).reshape(shape)
        )
    c = shape[-1]
    starts = (np.arange(math.prod(shape[:-1]), dtype=np.int64) * c).astype(np.int32)
    return api.add(starts.reshape(*shape[:-1], 1), np.arange(c, dtype=np.int32))


def _hash_iota(key: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """Both words of the hash of the counters ``(0, i)`` for the flat index ``i`` of each
    element of ``shape``."""
    # the counters' high words are 0: one scalar, broadcast by the first round's add
    return threefry2x32(_word(key, 0), _word(key, 1), np.int32(0), _flat_index(shape))


def random_bits(key: Any, shape: tuple[int, ...]) -> Any:
    """32 random bits per element (int32), as ``jax.random.bits``'s uint32."""
    y0, y1 = _hash_iota(key, shape)
    return api.bitwise_xor(y0, y1)


def key(seed: Any) -> Any:
    """A key from an integer seed, as ``jax.random.PRNGKey(seed)``: ``[0, seed mod 2³²]``
    (a traced int32 seed too).

    >>> import pypto as pto
    >>> pto.random.key(7).numpy()
    array([0, 7], dtype=int32)
    """
    if isinstance(seed, int | np.integer):
        low = int(seed) & 0xFFFFFFFF
        return api.asvalue(np.array([0, low], np.uint32).view(np.int32), "random.key")
    s = api.asvalue(seed, "random.key")
    if not s.dtype.is_integer or s.dtype is dt.bool_ or s.shape != ():  # type: ignore[attr-defined]
        raise DTypeError(f"a seed is one integer, got {api._aval(s)}", op="random.key")
    s = api.cast(s, dt.int32)
    return composite.stack([api.mul(s, 0), s], 0)


PRNGKey = key


def key_data(keys: Any) -> Any:
    """The key's two words (a pypto key is its own data)."""
    return api.asvalue(keys, "random.key_data")


_IMPL = "threefry2x32"


def _key_value(op: str, keys: Any) -> Any:
    """``keys`` as a value: a pypto key's own, or the bits of JAX's (typed keys through
    ``jax.random.key_data``, ``uint32`` words viewed as ``int32``)."""
    if "key<" in str(getattr(keys, "dtype", "")):  # a typed JAX key
        keys = jax.random.key_data(keys)
    if not isinstance(keys, api.Value) and np.asarray(keys).dtype == np.uint32:
        keys = np.asarray(keys).view(np.int32)
    return api.asvalue(keys, op)


def _keys(op: str, keys: Any) -> Any:
    """``keys`` (a pypto key or a batch of them, ``int32[..., 2]``; a JAX one's bits) as a
    value, checked."""
    v = _key_value(op, keys)
    if v.dtype is not dt.int32 or not v.shape or v.shape[-1] != 2:
        raise ShapeError(
            f"keys are int32[..., 2] (or JAX's uint32 words), got {api._aval(v)}",
            op=op,
            hint="make keys with pto.random.key(seed) and pto.random.split(key, n)",
        )
    return v


def key_impl(keys: Any) -> str:
    """The keys' PRNG, as ``jax.random.key_impl``: ``"threefry2x32"``, the one pypto has."""
    _keys("random.key_impl", keys)
    return _IMPL


def wrap_key_data(key_bits_array: Any, *, impl: Any = None) -> Any:
    """Keys from their words, as ``jax.random.wrap_key_data``: a pypto key is its own data
    (``int32[..., 2]``; JAX's ``uint32`` words keep their bits), so this checks and returns
    it. ``impl`` is ``None`` or ``"threefry2x32"``.

    >>> import numpy as np, pypto as pto
    >>> pto.random.wrap_key_data(np.array([0, 7], np.uint32)).numpy()
    array([0, 7], dtype=int32)
    """
    if impl is not None and str(impl) != _IMPL:
        raise ShapeError(f"impl {impl!r}: pypto's keys are {_IMPL}'s", op="random.wrap_key_data")
    return _keys("random.wrap_key_data", key_bits_array)


def clone(key: Any) -> Any:
    """The key, as ``jax.random.clone`` (which exists for JAX's key-reuse checker; pypto
    does not track reuse)."""
    return _keys("random.clone", key)


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys (``[*num, 2]``), as ``jax.random.split``: key ``i`` is the hash of
    the counters ``(0, i)``.

    >>> import pypto as pto
    >>> pto.random.split(pto.random.key(0)).numpy()
    array([[ 1797259609, -1715843330],
           [  928981903,  -841280227]], dtype=int32)
    """
    shape = api._shape_arg("random.split", num)
    y0, y1 = _hash_iota(_key_bits("random.split", key), shape)
    return composite.stack([y0, y1], len(shape))


def fold_in(key: Any, data: Any) -> Any:
    """A new key from ``key`` and a 32-bit integer, as ``jax.random.fold_in``: the hash of
    the counters ``(0, data)``."""
    k = _key_bits("random.fold_in", key)
    if isinstance(data, int | np.integer):
        d: Any = int(np.array(int(data) & 0xFFFFFFFF, np.uint32).view(np.int32))
    else:
        d = api.asvalue(data, "random.fold_in")
        if d.shape != () or not d.dtype.is_integer:
            raise ShapeError(f"folds in one integer, got {api._aval(d)}", op="random.fold_in")
        d = api.cast(d, dt.int32)
    y0, y1 = threefry2x32(_word(k, 0), _word(k, 1), np.int32(0), d)
    return composite.stack([y0, y1], 0)


def bits(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Random bits, as ``jax.random.bits``: int32 for its uint32 (the same bits), int8 for
    its uint8 (the low byte of each element's hash, as JAX takes it)."""
    name = np.dtype(dtype).name if dtype is not None else "uint32"
    if name not in ("uint32", "int32", "uint8", "int8"):
        raise DTypeError(
            f"bits of {name}: pypto gives 32 bits (int32) or 8 (int8)",
            op="random.bits",
            hint="ask for uint32 or uint8 (int32 or int8 hold the same bits)",
        )
    b = random_bits(_key_bits("random.bits", key), api._shape_arg("random.bits", shape))
    return api.cast(b, dt.int8) if name.endswith("8") else b


def _float_dtype(op: str, dtype: Any) -> dt.DType:
    d = dt.float32 if dtype is None else dt.dtype(dtype)
    if not d.is_floating:
        raise DTypeError(f"samples floats, got dtype {d}", op=op, hint="pass a float dtype")
    return d


def _int_dtype(op: str, dtype: Any) -> dt.DType:
    d = dt.int32 if dtype is None else dt.dtype(dtype)
    if not d.is_integer or d is dt.bool_:
        raise DTypeError(f"samples integers, got dtype {d}", op=op, hint="pass pto.int32")
    return d


def _unit(key: Any, shape: tuple[int, ...], d: dt.DType) -> Any:
    """Uniform floats in [0, 1) of dtype ``d``, as JAX makes them from the random bits."""
    return _bits_to_unit(random_bits(key, shape), d)


def _bits_to_unit(b: Any, d: dt.DType) -> Any:
    """Random bits to floats in [0, 1) as JAX does: the mantissa's bits (23 of 32 for
    float32, 10 of the low 16 for float16, 7 of the low 8 for bfloat16) under the exponent
    of 1.0, minus 1."""
    if d is dt.float32:
        one_to_two = api.bitwise_or(api.bitwise_and(api.right_shift(b, 9), 0x7FFFFF), 0x3F800000)
        return api.sub(api.bitcast_convert_type(one_to_two, dt.float32), 1.0)
    drop, width = (6, 10) if d is dt.float16 else (1, 7)
    m = api.bitwise_and(api.right_shift(b, drop), (1 << width) - 1)  # exact in d
    return api.cast(api.mul(api.cast(m, dt.float32), 2.0**-width), d)


def _in_dtype(op: str, x: Any, d: dt.DType) -> Any:
    return api.cast(api.asvalue(x, op), d)


def uniform(
    key: Any, shape: Any = (), dtype: Any = None, minval: Any = 0.0, maxval: Any = 1.0
) -> Any:
    """Uniform samples in ``[minval, maxval)``, as ``jax.random.uniform``: ``u·(maxval -
    minval) + minval`` in ``dtype`` (at least ``minval``) of JAX's own ``u`` in [0, 1). The
    default range gives JAX's floats bit for bit; another range may differ in the last bit,
    where JAX's CPU build fuses the multiply and add into one rounding and pypto rounds each.

    >>> import pypto as pto
    >>> pto.random.uniform(pto.random.key(1), (2,), minval=-1.0).numpy()
    array([-0.12273502,  0.06750584], dtype=float32)
    """
    op = "random.uniform"
    d = _float_dtype(op, dtype)
    shp = api._shape_arg(op, shape)
    lo, hi = _in_dtype(op, minval, d), _in_dtype(op, maxval, d)
    return _scaled(_unit(_key_bits(op, key), shp, d), lo, hi)


def _scaled(u: Any, lo: Any, hi: Any) -> Any:
    """Floats ``u`` in [0, 1) moved to ``[lo, hi)`` as JAX does, and held at ``lo`` or more."""
    return api.maximum(lo, api.add(api.mul(u, api.sub(hi, lo)), lo))


def _normal_of(u: Any, d: dt.DType) -> Any:
    """Standard normals from floats ``u`` in [0, 1): ``√2·erf⁻¹`` of them moved to
    ``(-1, 1)`` (the span rounds to 2, so the move is exact)."""
    lo = api.cast(float(np.nextafter(np.array(-1.0, d.np), np.array(0.0, d.np))), d)
    return api.mul(special.erf_inv(_scaled(u, lo, api.cast(1.0, d))), math.sqrt(2.0))


def normal(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard normal samples, as ``jax.random.normal``: ``√2·erf⁻¹(u)`` of uniform ``u``
    in ``(-1, 1)``, the same ``u`` as JAX's."""
    op = "random.normal"
    d = _float_dtype(op, dtype)
    return _normal_of(_unit(_key_bits(op, key), api._shape_arg(op, shape), d), d)


def bernoulli(key: Any, p: Any = 0.5, shape: Any = None, mode: str = "low") -> Any:
    """Booleans true with probability ``p``, as ``jax.random.bernoulli``: ``u < p`` for
    uniform ``u`` of ``p``'s dtype; ``mode="high"`` draws two uniforms, the second one
    scaled below the first's resolution, for probabilities under about 1e-7."""
    op = "random.bernoulli"
    _check_mode(op, mode)
    pv = api.asvalue(p, op)
    if not pv.dtype.is_floating:  # type: ignore[attr-defined]
        pv = api.cast(pv, dt.float32)
    shp = tuple(pv.shape) if shape is None else api._shape_arg(op, shape)  # type: ignore[attr-defined]
    if mode == "high":
        u1, u2 = _two_units(op, key, shp, pv.dtype)  # type: ignore[attr-defined]
        u2 = api.mul(u2, 2.0 ** -dt.finfo(pv.dtype).nmant)  # type: ignore[attr-defined]
        return api.less(u2, api.sub(pv, u1))
    return api.less(uniform(key, shp, pv.dtype), pv)  # type: ignore[attr-defined]


def _check_mode(op: str, mode: str | None, highest: bool = False) -> None:
    modes = ("low", "high", "highest") if highest else ("low", "high")
    if mode is not None and mode not in modes:
        raise ShapeError(
            f"mode {mode!r}: {op} takes one of {', '.join(map(repr, modes))}",
            op=op,
        )


def _fixed64_to_f32(hi: Any, lo: Any) -> Any:
    """The 64-bit fixed-point fraction ``(hi, lo)`` (bits of int32s, read unsigned) as the
    float32 that truncates it, as JAX's gumbel makes it: the leading one found by ``clz``,
    the next 23 bits the mantissa, the exponent from the count of leading zeros."""
    hz, lz = lax_ops.clz(hi), lax_ops.clz(lo)
    no_hi = api.equal(hz, 32)
    low = api.where(no_hi, api.left_shift(lo, lz), lax_ops.shift_right_logical(lo, api.sub(32, hz)))
    top = api.bitwise_or(api.where(no_hi, 0, api.left_shift(hi, hz)), low)
    mantissa = api.bitwise_and(lax_ops.shift_right_logical(top, 8), (1 << 23) - 1)
    exponent = api.left_shift(api.sub(126, api.where(no_hi, api.add(lz, 32), hz)), 23)
    exponent = api.bitwise_and(exponent, (1 << 30) - (1 << 22))
    return api.bitcast_convert_type(api.bitwise_or(exponent, mantissa), dt.float32)


def _gumbel_highest(key: Any, shape: tuple[int, ...]) -> Any:
    """float32 Gumbel samples from 64 random bits each, as JAX's ``mode="highest"``: ``u``
    (or ``1 - u``, two's complement, when ``u >= 1/2``) in 64-bit fixed point to a float32
    that keeps its small values, then ``-log(-log1p(-u))`` or ``-log(-log(1 - u))``."""
    b = random_bits(key, (2, *shape))
    hi, lo = api.getitem(b, 0), api.getitem(b, 1)
    nlo = api.bitwise_not(lo)
    n_hi = api.add(api.bitwise_not(hi), api.cast(api.equal(nlo, -1), dt.int32))
    n_lo = api.add(nlo, 1)  # (wraps, as uint32 does)
    small = api.greater_equal(hi, 0)  # hi < 2^31 as unsigned: u < 1/2
    x = _fixed64_to_f32(api.where(small, hi, n_hi), api.where(small, lo, n_lo))
    log1p_branch = api.neg(api.log(api.neg(composite.log1p(api.neg(x)))))
    log_branch = api.neg(api.log(api.neg(api.log(x))))
    return api.where(small, log1p_branch, log_branch)


def _two_units(op: str, key: Any, shape: tuple[int, ...], d: dt.DType) -> tuple[Any, Any]:
    """The two halves of ``uniform(key, (2, *shape), d)``: JAX's pair for ``mode="high"``."""
    u = _unit(_key_bits(op, key), (2, *shape), d)
    return api.getitem(u, 0), api.getitem(u, 1)


def _unsigned_rem(x: Any, s: Any) -> Any:
    """``x mod s`` for the 32-bit patterns ``x`` and ``s > 0`` read as unsigned (int32)."""
    big = api.less(s, 0)  # s >= 2^31: x < 2s, one subtraction at most
    flip = -(1 << 31)
    below = api.less(api.bitwise_xor(x, flip), api.bitwise_xor(s, flip))
    rem_big = api.where(below, x, api.sub(x, s))
    # s < 2^31: a negative x stands for x + 2^32, and 2^32 mod s = 2·((2^31 - 1) mod s + 1) mod s
    t = api.where(big, 1, s)
    half = composite.remainder(api.add(composite.remainder(2**31 - 1, t), 1), t)
    wrap = _add_mod(half, half, t)
    r = composite.remainder(x, t)
    rem_small = api.where(api.less(x, 0), _add_mod(r, wrap, t), r)
    return api.where(big, rem_big, rem_small)


def _add_mod(a: Any, b: Any, s: Any) -> Any:
    """``(a + b) mod s`` for ``a, b`` in ``[0, s)`` without overflowing: ``a - (s - b)``
    when ``a >= s - b``."""
    gap = api.sub(s, b)
    return api.where(api.greater_equal(a, gap), api.sub(a, gap), api.add(a, b))


def randint(key: Any, shape: Any, minval: Any, maxval: Any, dtype: Any = None) -> Any:
    """Integers in ``[minval, maxval)``, as ``jax.random.randint`` (the same values): two
    words of random bits per element combined modulo the span in uint32 arithmetic; int8 is
    sampled in int32 (its bounds clipped to int8's range) and cast, as JAX does.

    >>> import pypto as pto
    >>> pto.random.randint(pto.random.key(0), (4,), 0, 10).numpy()
    array([9, 0, 2, 3], dtype=int32)
    """
    op = "random.randint"
    d = _int_dtype(op, dtype)
    shp = api._shape_arg(op, shape)
    lo, hi = api.asvalue(minval, op), api.asvalue(maxval, op)
    lo, hi = api.cast(lo, dt.int32), api.cast(hi, dt.int32)  # floats truncate, as JAX's
    if d is dt.int8:
        lo, hi = composite.clip(lo, -128, 127), composite.clip(hi, -128, 128)
    k0, k1 = _pair(op, key)
    higher = random_bits(k0, shp)
    lower = random_bits(k1, shp)
    span = api.where(api.less_equal(hi, lo), 1, api.sub(hi, lo))  # its bits: the uint32 span
    span0 = api.equal(span, 0)  # 2^32 wrapped to 0: XLA's remainder by 0 leaves x, so the
    s = api.where(span0, 1, span)  # multiplier is 0 and the offset is the low word
    mult = _unsigned_rem(np.int32(65536), s)
    mult = _unsigned_rem(api.mul(mult, mult), s)
    off = api.add(api.mul(_unsigned_rem(higher, s), mult), _unsigned_rem(lower, s))
    off = api.where(span0, lower, _unsigned_rem(off, s))
    out = api.add(lo, off)
    return out if d is dt.int32 else api.cast(out, d)


def gumbel(key: Any, shape: Any = (), dtype: Any = None, mode: str | None = None) -> Any:
    """Standard Gumbel samples, as ``jax.random.gumbel``: ``-log(-log(u))`` of uniform ``u``
    in ``[tiny, 1)``; ``mode="high"`` adds a second uniform below the first's resolution
    where it is under 1/2 (``-log(-log1p(-x))``), for events under about 1e-7;
    ``mode="highest"`` (float32; other dtypes take ``"high"``, as in JAX) makes ``u`` from
    64 random bits in fixed point (:func:`_gumbel_highest`), bit for bit JAX's ``u``."""
    op = "random.gumbel"
    _check_mode(op, mode, highest=True)
    d = _float_dtype(op, dtype)
    fi = dt.finfo(d)
    if mode == "highest" and d is dt.float32:
        return _gumbel_highest(_key_bits(op, key), api._shape_arg(op, shape))
    if mode in ("high", "highest"):
        high, low = _two_units(op, key, api._shape_arg(op, shape), d)
        fine = api.add(api.add(high, api.mul(low, 2.0**-fi.nmant)), float(fi.tiny))
        x = api.where(api.greater_equal(high, 0.5), high, fine)
        return api.neg(api.log(api.neg(composite.log1p(api.neg(x)))))
    u = uniform(key, shape, d, float(fi.tiny), 1.0)
    return api.neg(api.log(api.neg(api.log(u))))


def categorical(
    key: Any,
    logits: Any,
    axis: int = -1,
    shape: Any = None,
    replace: bool = True,
    mode: str | None = None,
) -> Any:
    """Category indices drawn with probabilities ``softmax(logits)`` along ``axis``, as
    ``jax.random.categorical``: the argmax of the logits plus Gumbel noise (the top ``k``
    without replacement)."""
    op = "random.categorical"
    lg = api.asvalue(logits, op)
    nd = len(lg.shape)  # type: ignore[attr-defined]
    ax = composite._axis(op, lg, axis)
    batch = tuple(n for i, n in enumerate(lg.shape) if i != ax)  # type: ignore[attr-defined]
    shp = batch if shape is None else api._shape_arg(op, shape)
    if shp[len(shp) - len(batch) :] != batch:
        raise ShapeError(f"shape {shp} does not end in the logits' batch shape {batch}", op=op)
    prefix = shp[: len(shp) - len(batch)]
    if replace:
        full = list(batch)
        full.insert(ax, lg.shape[ax])  # type: ignore[attr-defined]
        g = gumbel(key, (*prefix, *full), lg.dtype, mode)  # type: ignore[attr-defined]
        noisy = api.add(g, api.reshape(lg, (1,) * len(prefix) + tuple(lg.shape)))  # type: ignore[attr-defined]
        return api.argmax(noisy, len(prefix) + ax)
    k = math.prod(prefix)
    if k > lg.shape[ax]:  # type: ignore[attr-defined]
        raise ShapeError(
            f"{k} samples without replacement from {lg.shape[ax]} categories",  # type: ignore[attr-defined]
            op=op,
        )
    noisy = api.add(lg, gumbel(key, tuple(lg.shape), lg.dtype, mode))  # type: ignore[attr-defined]
    _, idx = composite.top_k(composite.moveaxis(noisy, ax, nd - 1), k)
    idx = composite.moveaxis(idx, nd - 1, 0)
    return api.reshape(idx, shp)


def truncated_normal(key: Any, lower: Any, upper: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Normal samples within ``(lower, upper)``, as ``jax.random.truncated_normal``: the
    inverse of ``erf`` on uniform samples between ``erf`` of the bounds, kept strictly
    inside them."""
    op = "random.truncated_normal"
    d = _float_dtype(op, dtype)
    lo, hi = _in_dtype(op, lower, d), _in_dtype(op, upper, d)
    shp = (
        _broadcast(op, tuple(lo.shape), tuple(hi.shape))
        if shape is None
        else api._shape_arg(op, shape)
    )
    sqrt2 = math.sqrt(2.0)
    a, b = activations.erf(api.div(lo, sqrt2)), activations.erf(api.div(hi, sqrt2))
    out = api.mul(special.erf_inv(uniform(key, shp, d, a, b)), sqrt2)
    return composite.clip(
        out,
        numpy_lib.nextafter(lo, api.cast(math.inf, d)),
        numpy_lib.nextafter(hi, api.cast(-math.inf, d)),
    )


def exponential(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Exponential samples of rate 1, ``-log1p(-u)``, as ``jax.random.exponential``."""
    return _exponential_of(uniform(key, shape, _float_dtype("random.exponential", dtype)))


def _exponential_of(u: Any) -> Any:
    """Exponentials from floats ``u`` in [0, 1): ``-log1p(-u)`` (``log`` of ``1 - u`` is
    finite at ``u = 0``)."""
    return api.neg(composite.log1p(api.neg(u)))


def laplace(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Laplace samples, ``sign(u)·log1p(-|u|)`` of uniform ``u`` in ``(-1, 1)``, as
    ``jax.random.laplace``."""
    d = _float_dtype("random.laplace", dtype)
    u = uniform(key, shape, d, -1.0 + float(dt.finfo(d).epsneg), 1.0)
    return api.mul(composite.sign(u), composite.log1p(api.neg(api.abs(u))))


def logistic(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Logistic samples, ``log(u) - log1p(-u)``, as ``jax.random.logistic``."""
    d = _float_dtype("random.logistic", dtype)
    u = uniform(key, shape, d, float(dt.finfo(d).tiny), 1.0)
    return api.sub(api.log(u), composite.log1p(api.neg(u)))


def cauchy(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Cauchy samples, ``tan(π(u - 1/2))``, as ``jax.random.cauchy``."""
    d = _float_dtype("random.cauchy", dtype)
    u = uniform(key, shape, d, float(dt.finfo(d).eps), 1.0)
    return numpy_lib.tan(api.mul(api.sub(u, 0.5), math.pi))


def rademacher(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """±1 with equal probability, as ``jax.random.rademacher``."""
    d = dt.int32 if dtype is None else dt.dtype(dtype)
    b = api.cast(bernoulli(key, 0.5, shape), d)
    return api.cast(api.sub(api.mul(b, 2), 1), d)


def lognormal(key: Any, sigma: Any = 1.0, shape: Any = None, dtype: Any = None) -> Any:
    """``exp(sigma·z)`` of standard normal ``z``, as ``jax.random.lognormal``."""
    op = "random.lognormal"
    d = _float_dtype(op, dtype)
    s = _in_dtype(op, sigma, d)
    shp = tuple(s.shape) if shape is None else api._shape_arg(op, shape)
    return api.exp(api.mul(normal(key, shp, d), s))


def _shuffle(key: Any, x: Any, axis: int) -> Any:
    """``x`` reordered along ``axis`` by sorting on random 32-bit keys, in as many rounds as
    JAX uses (one below about 1,600 elements)."""
    size = math.prod(x.shape)
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = split(key)
        key, sub = api.getitem(keys, 0), api.getitem(keys, 1)
        # the bits as unsigned order: the sign bit flipped
        order = api.bitwise_xor(random_bits(sub, tuple(x.shape)), -(1 << 31))
        _, x = lax_ops.sort_key_val(order, x, axis)
    return x


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A random permutation of ``x`` along ``axis`` (of ``arange(x)`` for an integer ``x``),
    as ``jax.random.permutation``: the same order."""
    op = "random.permutation"
    k = _key_bits(op, key)
    if isinstance(x, int | np.integer):
        return _shuffle(k, api.asvalue(np.arange(int(x), dtype=np.int32)), 0)
    v = api.asvalue(x, op)
    ax = composite._axis(op, v, axis)
    if independent or len(v.shape) == 1:  # type: ignore[attr-defined]
        return _shuffle(k, v, ax)
    idx = _shuffle(k, api.asvalue(np.arange(v.shape[ax], dtype=np.int32)), 0)  # type: ignore[attr-defined]
    return api.take(v, idx, ax)


def choice(
    key: Any,
    a: Any,
    shape: Any = (),
    replace: bool = True,
    p: Any = None,
    axis: int = 0,
    mode: str | None = None,
) -> Any:
    """Samples from ``a`` (or ``arange(a)``) along ``axis``, as ``jax.random.choice``: with
    replacement uniform indices or inverse-CDF draws by ``p``; without, a permutation's head
    or Gumbel top-k by ``p``."""
    op = "random.choice"
    k = _key_bits(op, key)
    shp = api._shape_arg(op, shape)
    scalar = isinstance(a, int | np.integer)
    arr = None if scalar else api.asvalue(a, op)
    ax = 0 if arr is None else composite._axis(op, arr, axis)
    n = int(a) if arr is None else arr.shape[ax]  # type: ignore[attr-defined]
    draws = math.prod(shp)
    if n <= 0 and draws:
        raise ShapeError("a must be greater than 0 unless no samples are taken", op=op)
    if not replace and draws > n:
        raise ShapeError(f"a sample of {draws} from {n} without replacement", op=op)
    if p is None:
        if replace:
            ind = randint(k, shp, 0, n)
        else:
            perm = permutation(k, n if arr is None else arr, ax)
            if arr is not None:
                head = api.getitem(perm, (slice(None),) * ax + (slice(draws),))
                return api.reshape(head, (*arr.shape[:ax], *shp, *arr.shape[ax + 1 :]))  # type: ignore[attr-defined]
            ind = api.getitem(perm, slice(draws))
    else:
        pv = api.asvalue(p, op)
        if not pv.dtype.is_floating:  # type: ignore[attr-defined]
            pv = api.cast(pv, dt.float32)
        if tuple(pv.shape) != (n,):  # type: ignore[attr-defined]
            raise ShapeError(f"p {api._aval(pv)} for {n} choices: one probability each", op=op)
        if replace:
            cdf = composite.cumsum(pv)
            u = uniform(k, shp, pv.dtype)  # type: ignore[attr-defined]
            r = api.mul(api.getitem(cdf, -1), api.sub(1.0, u))
            ind = composite.searchsorted(cdf, r)
        else:
            g = api.add(gumbel(k, (n,), pv.dtype, mode), api.log(pv))  # type: ignore[attr-defined]
            ind = composite.top_k(g, draws)[1]
    if arr is None:
        return api.reshape(ind, shp)
    taken = api.take(arr, api.reshape(ind, (draws,)), ax)
    return api.reshape(taken, (*arr.shape[:ax], *shp, *arr.shape[ax + 1 :]))  # type: ignore[attr-defined]


def _broadcast(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape the parameters' shapes broadcast to; a ShapeError naming them if none."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(
            "the parameters' shapes " + ", ".join(map(str, shapes)) + " do not broadcast",
            op=op,
            hint="each axis, aligned from the right, must be equal or 1",
        ) from None


def _params(op: str, d: dt.DType, shape: Any, *params: Any) -> tuple[tuple[int, ...], list[Any]]:
    """The parameters in ``d`` and the sample shape: ``shape``, or their broadcast shape."""
    vs = [_in_dtype(op, p, d) for p in params]
    if shape is not None:
        return api._shape_arg(op, shape), vs
    return _broadcast(op, *(tuple(v.shape) for v in vs)), vs


def maxwell(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Maxwell samples: the length of three standard normals, as ``jax.random.maxwell``."""
    op = "random.maxwell"
    d = _float_dtype(op, dtype)
    z = normal(key, (*api._shape_arg(op, shape), 3), d)
    return api.sqrt(api.sum(api.mul(z, z), (-1,)))


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Maxwell samples with a random sign, scaled and shifted, as
    ``jax.random.double_sided_maxwell`` (the parameters' shape follows ``shape``)."""
    op = "random.double_sided_maxwell"
    d = _float_dtype(op, dtype)
    params, (lo, sc) = _params(op, d, None, loc, scale)
    shp = (*(api._shape_arg(op, shape) or params), *params)
    k0, k1 = _pair(op, key)
    m = maxwell(k0, shp, d)
    sign = rademacher(k1, shp, d)
    return api.add(api.mul(api.mul(sign, m), sc), lo)


def weibull_min(
    key: Any, scale: Any, concentration: Any, shape: Any = (), dtype: Any = None
) -> Any:
    """Weibull samples, the inverse CDF ``(-log1p(-u))^(1/k)·scale``, as
    ``jax.random.weibull_min``."""
    op = "random.weibull_min"
    d = _float_dtype(op, dtype)
    u = uniform(key, shape, d)
    c = _in_dtype(op, concentration, d)
    power = api.pow(api.neg(composite.log1p(api.neg(u))), api.div(1.0, c))
    return api.mul(power, _in_dtype(op, scale, d))


def pareto(key: Any, b: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Pareto samples of shape ``b``, ``exp(e / b)`` of exponential ``e``, as
    ``jax.random.pareto``."""
    op = "random.pareto"
    d = _float_dtype(op, dtype)
    shp, (bv,) = _params(op, d, shape, b)
    return api.exp(api.div(exponential(key, shp, d), bv))


def rayleigh(key: Any, scale: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Rayleigh samples, ``scale·sqrt(-2 log u)``, as ``jax.random.rayleigh``."""
    op = "random.rayleigh"
    d = _float_dtype(op, dtype)
    shp, (sc,) = _params(op, d, shape, scale)
    u = uniform(key, shp, d)
    return api.mul(api.broadcast_to(sc, shp), api.sqrt(api.mul(api.log(u), -2.0)))


def wald(key: Any, mean: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Wald (inverse Gaussian) samples of ``mean``, by the transformation with one normal
    and one uniform (Michael, Schucany and Haas), as ``jax.random.wald``."""
    op = "random.wald"
    d = _float_dtype(op, dtype)
    shp, (mu,) = _params(op, d, shape, mean)
    k0, k1 = _pair(op, key)
    mu = api.broadcast_to(mu, shp)
    v = normal(k0, shp, d)
    z = uniform(k1, shp, d)
    y = api.mul(v, v)
    mu2 = api.mul(mu, mu)
    root = api.sqrt(api.add(api.mul(api.mul(mu, 4.0), y), api.mul(mu2, api.mul(y, y))))
    x = api.sub(api.add(mu, api.div(api.mul(mu2, y), 2.0)), api.mul(api.div(mu, 2.0), root))
    return api.where(api.less_equal(z, api.div(mu, api.add(mu, x))), x, api.div(mu2, x))


def geometric(key: Any, p: Any, shape: Any = None, dtype: Any = None) -> Any:
    """The number of Bernoulli trials to the first success, ``floor(log u / log1p(-p)) + 1``,
    as ``jax.random.geometric`` (``u = 0`` read as 1, as JAX does)."""
    op = "random.geometric"
    pv = api.asvalue(p, op)
    if not pv.dtype.is_floating:  # type: ignore[attr-defined]
        pv = api.cast(pv, dt.float32)
    shp = tuple(pv.shape) if shape is None else api._shape_arg(op, shape)  # type: ignore[attr-defined]
    u = uniform(key, shp, pv.dtype)  # type: ignore[attr-defined]
    u = api.where(api.equal(u, 0.0), 1.0, u)
    g = api.add(composite.floor(api.div(api.log(u), composite.log1p(api.neg(pv)))), 1.0)
    return api.cast(g, dt.int32 if dtype is None else dt.dtype(dtype))


def triangular(
    key: Any, left: Any, mode: Any, right: Any, shape: Any = None, dtype: Any = None
) -> Any:
    """Triangular samples on ``[left, right]`` peaking at ``mode``, by the inverse CDF, as
    ``jax.random.triangular``."""
    op = "random.triangular"
    d = _float_dtype(op, dtype)
    shp, (a, c, b) = _params(op, d, shape, left, mode, right)
    a, c, b = (api.broadcast_to(v, shp) for v in (a, c, b))
    width = api.sub(b, a)
    fc = api.div(api.sub(c, a), width)
    u = uniform(key, shp, d)
    low = api.add(a, api.sqrt(api.mul(api.mul(u, width), api.sub(c, a))))
    high = api.sub(b, api.sqrt(api.mul(api.mul(api.sub(1.0, u), width), api.sub(b, c))))
    return api.where(api.less(u, fc), low, high)


# --- gamma and the samplers built on it -----------------------------------------------------

# Marsaglia and Tsang's method accepts at least 95% of its proposals for a shape of 1 or more,
# and its normal proposal is positive (v > 0) but for x < -3√d, under 1% of them: rounds
# enough that every element has accepted but with probability below 1e-10 and 1e-9
_GAMMA_ROUNDS, _PROPOSAL_ROUNDS = 8, 4


def _split_words(k0: Any, k1: Any, n: int) -> list[tuple[Any, Any]]:
    """``split(key, n)`` of every key of the arrays of words ``(k0, k1)``."""
    return [threefry2x32(k0, k1, np.int32(0), np.int32(i)) for i in range(n)]


def _bits_one(k0: Any, k1: Any) -> Any:
    """``random_bits(key, 32, ())`` of every key of ``(k0, k1)``: the counter (0, 0)."""
    y0, y1 = threefry2x32(k0, k1, np.int32(0), np.int32(0))
    return api.bitwise_xor(y0, y1)


def _unit_one(k0: Any, k1: Any, d: dt.DType) -> Any:
    """``uniform(key, (), d)`` of every key of ``(k0, k1)``."""
    return _bits_to_unit(_bits_one(k0, k1), d)


def _normal_one(k0: Any, k1: Any, d: dt.DType) -> Any:
    """``normal(key, (), d)`` of every key of ``(k0, k1)``."""
    return _normal_of(_unit_one(k0, k1, d), d)


def _gamma_words(k0: Any, k1: Any, a: Any, d: dt.DType, log_space: bool) -> Any:
    """JAX's ``_gamma_one`` for each element: Marsaglia and Tsang's method with the shape
    boosted by 1 below 1, its loops unrolled over every element at once, each element
    keeping its state once it has accepted."""
    boost = api.greater_equal(a, 1.0)
    alpha = api.where(boost, a, api.add(a, 1.0))
    dd = api.sub(alpha, 1.0 / 3.0)
    c = api.div(1.0 / 3.0, api.sqrt(dd))
    (k0, k1), (s0, s1) = _split_words(k0, k1, 2)
    x2 = api.mul(a, 0.0)  # X, V, U of the first round's test: it always runs
    v3 = api.add(x2, 1.0)
    u = api.add(x2, 2.0)
    for _ in range(_GAMMA_ROUNDS):
        squeeze = api.greater_equal(u, api.sub(1.0, api.mul(api.mul(x2, x2), 0.0331)))
        tail = api.add(api.mul(x2, 0.5), api.mul(dd, api.add(api.sub(1.0, v3), api.log(v3))))
        again = composite.logical_and(squeeze, api.greater_equal(api.log(u), tail))
        (k0n, k1n), (x0, x1), (u0, u1) = _split_words(k0, k1, 3)
        x, v = api.mul(a, 0.0), api.sub(api.mul(a, 0.0), 1.0)
        for _ in range(_PROPOSAL_ROUNDS):  # a normal proposal until v > 0
            redo = api.less_equal(v, 0.0)
            (x0n, x1n), (p0, p1) = _split_words(x0, x1, 2)
            xs = _normal_one(p0, p1, d)
            x = api.where(redo, xs, x)
            v = api.where(redo, api.add(api.mul(xs, c), 1.0), v)
            x0, x1 = api.where(redo, x0n, x0), api.where(redo, x1n, x1)
        x2 = api.where(again, api.mul(x, x), x2)
        v3 = api.where(again, api.mul(api.mul(v, v), v), v3)
        u = api.where(again, _unit_one(u0, u1, d), u)
        k0, k1 = api.where(again, k0n, k0), api.where(again, k1n, k1)
    if log_space:
        log_u = api.neg(_exponential_of(_unit_one(s0, s1, d)))
        log_boost = api.where(
            composite.logical_or(boost, api.equal(log_u, 0.0)), 0.0, api.div(log_u, a)
        )
        return api.add(api.add(api.log(dd), api.log(v3)), log_boost)
    samples = api.sub(1.0, _unit_one(s0, s1, d))
    scale = api.where(boost, 1.0, api.pow(samples, api.div(1.0, a)))
    return api.mul(api.mul(dd, v3), scale)


def _gamma(op: str, key: Any, a: Any, shape: Any, dtype: Any, log_space: bool) -> Any:
    d = _float_dtype(op, dtype)
    av = _in_dtype(op, a, d)
    shp = tuple(av.shape) if shape is None else api._shape_arg(op, shape)
    av = api.broadcast_to(av, shp)
    n = math.prod(shp)
    if n == 0:
        return av
    return _gamma_fn(d, log_space)(_key_bits(op, key), av)


@functools.cache
def _gamma_fn(d: dt.DType, log_space: bool) -> Any:
    """Gamma sampling of dtype ``d`` as a function of the key and the shapes ``a`` whose
    gradient in ``a`` is the implicit one, as JAX's: the sample held at its quantile moves
    by ``random_gamma_grad(a, x)`` (over ``x`` for the logarithm)."""
    from pypto.graph.custom_vjp import custom_vjp  # the graph layer imports this module
    from pypto.lax import random_gamma_grad

    def draw(key: Any, a: Any) -> Any:
        shp = tuple(a.shape)
        keys = split(key, math.prod(shp))  # one key per element, as JAX's map over them
        k0 = api.reshape(api.getitem(keys, (slice(None), 0)), shp)
        k1 = api.reshape(api.getitem(keys, (slice(None), 1)), shp)
        return _gamma_words(k0, k1, a, d, log_space)

    draw.__name__ = f"random_{'log' if log_space else ''}gamma_{d.short}"
    fn = custom_vjp(draw)

    def fwd(key: Any, a: Any) -> Any:
        out = draw(key, a)
        return out, (a, out)

    def bwd(res: Any, g: Any) -> Any:
        a, out = res
        if not log_space:
            return None, api.mul(g, random_gamma_grad(a, out))
        x = api.exp(out)  # a sample that underflowed counts as the smallest normal
        x = api.where(api.equal(x, 0.0), float(dt.finfo(d).tiny), x)
        return None, api.mul(g, api.div(random_gamma_grad(a, x), x))

    fn.defvjp(fwd, bwd)
    return fn


def gamma(key: Any, a: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Gamma(a, 1) samples, as ``jax.random.gamma``: Marsaglia and Tsang's method with JAX's
    keys, proposals and boost, so the same draws (to the tolerance of ``log``, ``erf_inv``
    and ``pow``). The loops are unrolled: 8 rounds of proposals, each with up to 4 normal
    draws, every element at once; an element still rejecting after them (probability below
    1e-10) keeps its last proposal. Differentiable in ``a`` as JAX's is: implicitly, through
    :func:`pto.lax.random_gamma_grad`."""
    return _gamma("random.gamma", key, a, shape, dtype, False)


def loggamma(key: Any, a: Any, shape: Any = None, dtype: Any = None) -> Any:
    """``log`` of Gamma(a, 1) samples computed in log space, as ``jax.random.loggamma``
    (accurate for small ``a``, whose samples underflow)."""
    return _gamma("random.loggamma", key, a, shape, dtype, True)


def beta(key: Any, a: Any, b: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Beta(a, b) samples from two log-gamma draws, as ``jax.random.beta``."""
    op = "random.beta"
    d = _float_dtype(op, dtype)
    shp, (av, bv) = _params(op, d, shape, a, b)
    k0, k1 = _pair(op, key)
    ga = loggamma(k0, api.broadcast_to(av, shp), shp, d)
    gb = loggamma(k1, api.broadcast_to(bv, shp), shp, d)
    top = api.maximum(ga, gb)
    ea, eb = api.exp(api.sub(ga, top)), api.exp(api.sub(gb, top))
    return api.div(ea, api.add(ea, eb))


def dirichlet(key: Any, alpha: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Dirichlet samples: the softmax of log-gamma draws, as ``jax.random.dirichlet``."""
    op = "random.dirichlet"
    d = _float_dtype(op, dtype)
    al = _in_dtype(op, alpha, d)
    if len(al.shape) < 1:
        raise ShapeError(f"alpha needs at least one axis, got {api._aval(al)}", op=op)
    shp = tuple(al.shape[:-1]) if shape is None else api._shape_arg(op, shape)
    lg = loggamma(key, al, (*shp, al.shape[-1]), d)
    return composite.softmax(lg, -1)


def chisquare(key: Any, df: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Chi-square samples, ``2·exp(loggamma(df / 2))``, as ``jax.random.chisquare``."""
    op = "random.chisquare"
    d = _float_dtype(op, dtype)
    half = api.div(_in_dtype(op, df, d), 2.0)
    return api.mul(api.exp(loggamma(key, half, shape, d)), 2.0)


def t(key: Any, df: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Student's t samples, ``n·sqrt(df / 2 / g)`` of a normal ``n`` and a Gamma(df / 2)
    ``g``, as ``jax.random.t``."""
    op = "random.t"
    d = _float_dtype(op, dtype)
    dv = _in_dtype(op, df, d)
    shp = tuple(dv.shape) if shape is None else api._shape_arg(op, shape)
    k0, k1 = _pair(op, key)
    n = normal(k0, shp, d)
    half = api.div(dv, 2.0)
    g = gamma(k1, half, shp, d)
    return api.mul(n, api.sqrt(api.div(half, g)))


def f(key: Any, dfnum: Any, dfden: Any, shape: Any = None, dtype: Any = None) -> Any:
    """F samples, the ratio of two chi-squares over their degrees of freedom, as
    ``jax.random.f``."""
    op = "random.f"
    d = _float_dtype(op, dtype)
    num_df, den_df = _in_dtype(op, dfnum, d), _in_dtype(op, dfden, d)
    k0, k1 = _pair(op, key)
    den = api.div(chisquare(k0, den_df, shape, d), den_df)
    num = api.div(chisquare(k1, num_df, shape, d), num_df)
    return api.div(num, den)


def generalized_normal(key: Any, p: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Generalized normal samples of power ``p``, ``±g^(1/p)`` for a Gamma(1/p) ``g`` and a
    random sign, as ``jax.random.generalized_normal``."""
    op = "random.generalized_normal"
    d = _float_dtype(op, dtype)
    pv = _in_dtype(op, p, d)
    shp = api._shape_arg(op, shape)
    k0, k1 = _pair(op, key)
    g = gamma(k0, api.div(1.0, pv), shp, d)
    r = rademacher(k1, shp, d)
    return api.mul(r, api.pow(g, api.div(1.0, pv)))


# --- samplers built on linear algebra -------------------------------------------------------


def _check_shape(op: str, shape: tuple[int, ...], *param_shapes: tuple[int, ...]) -> None:
    """JAX's rule for an explicit sample shape: the parameters broadcast to it."""
    try:
        ok = np.broadcast_shapes(shape, *param_shapes) == shape
    except ValueError:
        ok = False
    if not ok:
        shapes = ", ".join(str(s) for s in param_shapes)
        raise ShapeError(
            f"the parameters' shapes {shapes} do not broadcast to the sample shape {shape}",
            op=op,
            hint="pass shape=None for their broadcast shape",
        )


def multivariate_normal(
    key: Any, mean: Any, cov: Any, shape: Any = None, dtype: Any = None, method: str = "cholesky"
) -> Any:
    """Samples of N(mean, cov), as ``jax.random.multivariate_normal``: ``mean + F z`` for
    standard normals ``z`` (JAX's) and a factor ``F`` of ``cov`` with ``F Fᵀ = cov``: the
    Cholesky factor, or from ``method="eigh"`` or ``"svd"``. The sample shape is ``shape +
    mean.shape[-1:]`` (``shape`` defaults to the batch shapes of ``mean`` and ``cov``
    broadcast).

    >>> import pypto as pto
    >>> x = pto.random.multivariate_normal(pto.random.key(0), pto.zeros(2),
    ...                                    pto.tensor([[4.0, 0.0], [0.0, 1.0]]), (3,))
    >>> x.shape
    (3, 2)
    """
    from pypto.ops import solvers, spectral

    op = "random.multivariate_normal"
    if method not in ("cholesky", "eigh", "svd"):
        raise ShapeError(
            f"method={method!r} is not one of 'cholesky', 'eigh', 'svd'",
            op=op,
            hint="cholesky is the fastest; eigh and svd accept a singular covariance",
        )
    d = _float_dtype(op, dtype)
    mu, cv = _in_dtype(op, mean, d), _in_dtype(op, cov, d)
    ms, cs = tuple(mu.shape), tuple(cv.shape)
    if len(ms) < 1 or len(cs) < 2 or cs[-2:] != (ms[-1], ms[-1]):
        raise ShapeError(
            f"needs mean [..., n] and cov [..., n, n], got mean {api._aval(mu)} and cov "
            f"{api._aval(cv)}",
            op=op,
        )
    n = ms[-1]
    if shape is None:
        shp = _broadcast(op, ms[:-1], cs[:-2])
    else:
        shp = api._shape_arg(op, shape)
        _check_shape(op, shp, ms[:-1], cs[:-2])
    if method == "svd":
        u, s, _ = spectral.svd(cv)
        factor = api.mul(u, composite.expand_dims(api.sqrt(s), -2))
    elif method == "eigh":
        w, v = spectral.eigh(cv)
        factor = api.mul(v, composite.expand_dims(api.sqrt(w), -2))
    else:
        factor = solvers.cholesky(cv)
    z = normal(key, (*shp, n), d)
    fz = api.getitem(api.matmul(factor, composite.expand_dims(z, -1)), (Ellipsis, 0))
    return api.add(mu, fz)


def orthogonal(key: Any, n: int, shape: Any = (), dtype: Any = None, m: int | None = None) -> Any:
    """Random matrices with orthonormal columns (or rows), uniform over their group (Haar),
    as ``jax.random.orthogonal``: the ``Q`` of the QR factorization of JAX's normal draws,
    its columns' signs set by ``R``'s diagonal. The shape is ``shape + (n, m)``, ``m``
    defaulting to ``n``.

    >>> import pypto as pto
    >>> q = pto.random.orthogonal(pto.random.key(0), 3)
    >>> bool(abs((q @ q.T).numpy() - pto.eye(3).numpy()).max() < 1e-5)
    True
    """
    from pypto.ops import solvers

    op = "random.orthogonal"
    d = _float_dtype(op, dtype)
    shp = api._shape_arg(op, shape)
    rows, cols = _static_int(op, "n", n), _static_int(op, "m", n if m is None else m)
    z = normal(key, (*shp, max(rows, cols), min(rows, cols)), d)
    q, r = solvers.qr(z)
    signs = composite.sign(composite.diagonal(r, 0, -2, -1))
    x = api.mul(q, composite.expand_dims(signs, -2))
    return composite.swapaxes(x, -1, -2) if rows < cols else x


def _static_int(op: str, what: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
        raise ShapeError(
            f"{what} must be a non-negative Python int known when tracing, got {v!r:.40}", op=op
        )
    return int(v)


def ball(key: Any, d: int, p: float = 2, shape: Any = (), dtype: Any = None) -> Any:
    """Points uniform in the unit ``p``-norm ball of ``R^d``, as ``jax.random.ball``: ``d``
    generalized normals ``g`` divided by ``(sum |g|^p + e)^(1/p)`` for an exponential ``e``
    (Barthe, Guédon, Mendelson and Naor).

    >>> import pypto as pto
    >>> x = pto.random.ball(pto.random.key(0), 3, shape=(100,))
    >>> bool(((x * x).sum(-1) <= 1).numpy().all())
    True
    """
    op = "random.ball"
    dd = _float_dtype(op, dtype)
    dim = _static_int(op, "d", d)
    if isinstance(p, bool) or not isinstance(p, int | float | np.integer | np.floating):
        raise ShapeError(f"p must be a Python number, got {p!r:.40}", op=op)
    shp = api._shape_arg(op, shape)
    k1, k2 = _pair(op, key)
    g = generalized_normal(k1, p, (*shp, dim), dd)
    e = exponential(k2, shp, dd)
    norm = api.add(api.sum(api.pow(api.abs(g), float(p)), (-1,)), e)
    return api.div(g, composite.expand_dims(api.pow(norm, 1.0 / p), -1))


# --- poisson and binomial: JAX's loops over the whole shape ----------------------------------

# JAX draws a whole-shape round until every element is done. Eagerly pypto does the same;
# traced, the count is fixed (the NPU program has no data-dependent loops) at rounds that
# every element needs but with probability below 1e-10: Knuth's method (and the binomial's
# inversion) takes one round more than its sample, under 40 for a rate below 10
# (P(Poisson(10) >= 40) = 7e-13); the rejection samplers accept at least 72% of proposals
# (measured from 10 to 1e5), 0.28^20 = 8e-12.
_COUNT_ROUNDS, _REJECTION_ROUNDS = 40, 20
_EAGER_ROUNDS = 10_000  # JAX's own cap is far away; every loop here ends long before


def _rounds(bound: int, pending: Any, body: Any, carry: tuple[Any, ...]) -> tuple[Any, ...]:
    """``carry = body(carry)`` while any element of ``pending(carry)`` is true, as JAX's
    ``while_loop`` over the whole shape: eagerly JAX's trip count exactly; traced, ``bound``
    rounds, each kept only while some element was pending before it (the rejection samplers
    take every accepted proposal, even an element's second, so the rounds past JAX's end
    must change nothing)."""
    done = 0
    while done < _EAGER_ROUNDS:
        more = composite.any(pending(carry))
        values = getattr(more, "numpy", None)
        if values is None:  # traced
            for i in range(bound - done):
                if i:
                    more = composite.any(pending(carry))
                new = body(carry)
                carry = tuple(api.where(more, n, o) for n, o in zip(new, carry, strict=True))
            return carry
        if not bool(values()):
            return carry
        carry = body(carry)
        done += 1
    return carry


def _poisson_knuth(key: Any, lam: Any, shape: tuple[int, ...]) -> Any:
    """Knuth's method: uniforms multiplied (their logs added) until the product drops below
    ``exp(-lam)``; the count of them, minus one (int32)."""

    def body(c: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k, rng, log_prod = c
        keys = split(rng)
        rng, sub = api.getitem(keys, 0), api.getitem(keys, 1)
        k = api.where(api.greater(log_prod, api.neg(lam)), api.add(k, 1), k)
        return k, rng, api.add(log_prod, api.log(uniform(sub, shape)))

    init = (lax_ops.full(shape, 0, dt.int32), key, lax_ops.full(shape, 0, dt.float32))
    k, _, _ = _rounds(_COUNT_ROUNDS, lambda c: api.greater(c[2], api.neg(lam)), body, init)
    return api.sub(k, 1)


def _poisson_rejection(key: Any, lam: Any, shape: tuple[int, ...]) -> Any:
    """Hörmann's transformed rejection (PTRS), JAX's constants and expressions."""
    log_lam = api.log(lam)
    b = api.add(api.mul(api.sqrt(lam), 2.53), 0.931)
    a = api.add(api.mul(b, 0.02483), -0.059)
    inv_alpha = api.add(api.div(1.1328, api.sub(b, 3.4)), 1.1239)
    v_r = api.sub(0.9277, api.div(3.6224, api.sub(b, 2.0)))

    def body(c: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k_out, accepted, rng = c
        keys = split(rng, 3)
        rng = api.getitem(keys, 0)
        u = api.sub(uniform(api.getitem(keys, 1), shape), 0.5)
        v = uniform(api.getitem(keys, 2), shape)
        us = api.sub(0.5, api.abs(u))
        k = _rejection_k(a, b, us, u, lam, 0.43)
        s = api.log(api.div(api.mul(v, inv_alpha), api.add(api.div(a, api.mul(us, us)), b)))
        t = api.sub(api.add(api.neg(lam), api.mul(k, log_lam)), special.lgamma(api.add(k, 1.0)))
        accept1 = composite.logical_and(api.greater_equal(us, 0.07), api.less_equal(v, v_r))
        tiny = composite.logical_and(api.less(us, 0.013), api.greater(v, us))
        reject = composite.logical_or(api.less(k, 0.0), tiny)
        accept = composite.logical_or(
            accept1, composite.logical_and(composite.logical_not(reject), api.less_equal(s, t))
        )
        return api.where(accept, k, k_out), composite.logical_or(accepted, accept), rng

    init = (lax_ops.full(shape, -1.0, dt.float32), lax_ops.full(shape, 0, dt.bool_), key)
    k, _, _ = _rounds(_REJECTION_ROUNDS, lambda c: composite.logical_not(c[1]), body, init)
    return k


def _rejection_k(a: Any, b: Any, us: Any, u: Any, *shifts: Any) -> Any:
    """The proposal of the transformed rejection samplers, ``floor((2a / us + b)·u + shift
    + ...)``, added left to right as JAX writes it."""
    k = api.mul(api.add(api.div(api.mul(a, 2.0), us), b), u)
    for sh in shifts:
        k = api.add(k, sh)
    return composite.floor(k)


def poisson(key: Any, lam: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Poisson samples of rate ``lam``, as ``jax.random.poisson``: JAX's keys and its two
    methods, Knuth's below a rate of 10 and Hörmann's transformed rejection above, so the
    same integers. JAX loops until every element is done; eagerly pypto does too, and under
    ``jit`` it runs a fixed 40 (Knuth) and 20 (rejection) rounds, which suffice but with
    probability below 1e-10 per element (one that needs more keeps its count so far).

    >>> import pypto as pto
    >>> pto.random.poisson(pto.random.key(0), 3.0, (5,)).numpy()
    array([0, 0, 4, 4, 1], dtype=int32)
    """
    op = "random.poisson"
    d = _int_dtype(op, dtype)
    lv = _in_dtype(op, lam, dt.float32)
    if shape is None:
        shp = tuple(lv.shape)
    else:
        shp = api._shape_arg(op, shape)
        _check_shape(op, shp, tuple(lv.shape))
    lv = api.broadcast_to(lv, shp)
    k = _key_bits(op, key)
    use_knuth = composite.logical_or(composite.isnan(lv), api.less(lv, 10.0))
    knuth = _poisson_knuth(k, api.where(use_knuth, lv, 0.0), shp)
    rejection = _poisson_rejection(k, api.where(use_knuth, 1e5, lv), shp)
    out = api.where(use_knuth, api.cast(knuth, d), api.cast(rejection, d))
    return api.where(api.equal(lv, 0.0), lax_ops.full(shp, 0, d), out)


_STIRLING_TAIL = (
    0.0810614667953272,
    0.0413406959554092,
    0.0276779256849983,
    0.02079067210376509,
    0.0166446911898211,
    0.0138761288230707,
    0.0118967099458917,
    0.0104112652619720,
    0.00925546218271273,
    0.00833056343336287,
)
"""``log k! - log(√(2π) (k+1)^(k+1/2) e^-(k+1))`` for k = 0..9, JAX's table."""


def _stirling_tail(k: Any) -> Any:
    """The error of Stirling's approximation to ``log (k+1)!``: JAX's table up to 9, its
    series above."""
    kc = composite.clip(k, 0.0, 9.0)
    kp1sq = api.mul(api.add(kc, 1.0), api.add(kc, 1.0))
    series = api.div(
        api.sub(1.0 / 12, api.div(api.sub(1.0 / 360, api.div(1.0 / 1260, kp1sq)), kp1sq)),
        api.add(kc, 1.0),
    )
    idx = composite.floor(kc)
    table = series
    for j in range(len(_STIRLING_TAIL) - 1, -1, -1):
        table = api.where(api.equal(idx, float(j)), _STIRLING_TAIL[j], table)
    return api.where(api.less_equal(k, 9.0), table, series)


def _binomial_inversion(key: Any, count: Any, q: Any, shape: tuple[int, ...]) -> Any:
    """Geometric waiting times added until they pass ``count``; how many, minus one."""
    log1mq = composite.log1p(api.neg(q))

    def body(c: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        num, total, rng = c
        keys = split(rng)
        sub, rng = api.getitem(keys, 0), api.getitem(keys, 1)
        num = api.where(api.less_equal(total, count), api.add(num, 1.0), num)
        u = uniform(sub, shape, q.dtype)
        geom = composite.ceil(api.div(api.log(u), log1mq))
        return num, api.add(total, geom), rng

    zeros = lax_ops.full(shape, 0, q.dtype)
    num, _, _ = _rounds(
        _COUNT_ROUNDS, lambda c: api.less_equal(c[1], count), body, (zeros, zeros, key)
    )
    return api.sub(num, 1.0)


def _btrs(key: Any, count: Any, prob: Any, shape: tuple[int, ...]) -> Any:
    """Hörmann's transformed rejection with squeeze (BTRS), JAX's constants, and its bound
    summed in JAX's order."""
    log = api.log
    stddev = api.sqrt(api.mul(api.mul(count, prob), api.sub(1.0, prob)))
    b = api.add(api.mul(stddev, 2.53), 1.15)
    a = api.add(api.add(api.mul(b, 0.0248), -0.0873), api.mul(prob, 0.01))
    c = api.add(api.mul(count, prob), 0.5)
    v_r = api.sub(0.92, api.div(4.2, b))
    r = api.div(prob, api.sub(1.0, prob))
    alpha = api.mul(api.add(api.div(5.1, b), 2.83), stddev)
    m = composite.floor(api.mul(api.add(count, 1.0), prob))
    n_m = api.add(api.sub(count, m), 1.0)
    mode_term = api.mul(api.add(m, 0.5), log(api.div(api.add(m, 1.0), api.mul(r, n_m))))
    tail_m, tail_n_m = _stirling_tail(m), _stirling_tail(api.sub(count, m))

    def body(cr: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k_out, accepted, rng = cr
        keys = split(rng, 3)
        rng = api.getitem(keys, 0)
        u = api.sub(uniform(api.getitem(keys, 1), shape, prob.dtype), 0.5)
        v = uniform(api.getitem(keys, 2), shape, prob.dtype)
        us = api.sub(0.5, api.abs(u))
        accept1 = composite.logical_and(api.greater_equal(us, 0.07), api.less_equal(v, v_r))
        k = _rejection_k(a, b, us, u, c)
        reject = composite.logical_or(api.less(k, 0.0), api.greater(k, count))
        lv = log(api.div(api.mul(v, alpha), api.add(api.div(a, api.mul(us, us)), b)))
        n_k = api.add(api.sub(count, k), 1.0)
        ub = api.add(mode_term, api.mul(api.add(count, 1.0), log(api.div(n_m, n_k))))
        ub = api.add(ub, api.mul(api.add(k, 0.5), log(api.div(api.mul(r, n_k), api.add(k, 1.0)))))
        ub = api.add(api.add(ub, tail_m), tail_n_m)
        ub = api.sub(api.sub(ub, _stirling_tail(k)), _stirling_tail(api.sub(count, k)))
        accept = composite.logical_or(
            accept1,
            composite.logical_and(composite.logical_not(reject), api.less_equal(lv, ub)),
        )
        return api.where(accept, k, k_out), composite.logical_or(accepted, accept), rng

    init = (lax_ops.full(shape, -1.0, prob.dtype), lax_ops.full(shape, 0, dt.bool_), key)
    k, _, _ = _rounds(_REJECTION_ROUNDS, lambda cr: composite.logical_not(cr[1]), body, init)
    return k


def binomial(key: Any, n: Any, p: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Binomial samples: successes in ``n`` trials of probability ``p``, as
    ``jax.random.binomial`` (floats, as JAX's): JAX's keys and its two methods, inversion
    (geometric waiting times) for ``n·min(p, 1-p) <= 10`` and Hörmann's BTRS above, so the
    same counts; ``n`` is floored, a NaN or negative ``n`` or a NaN ``p`` gives NaN and an
    infinite ``n`` infinity. Eagerly the loops run as long as JAX's; under ``jit`` they run
    a fixed 40 and 20 rounds, which suffice but with probability below 1e-10 per element.

    >>> import pypto as pto
    >>> pto.random.binomial(pto.random.key(0), 10, 0.3, (5,)).numpy()
    array([2., 2., 1., 2., 1.], dtype=float32)
    """
    op = "random.binomial"
    d = _float_dtype(op, dtype)
    pv: Any = api.asvalue(p, op)
    if not pv.dtype.is_floating:
        pv = api.cast(pv, dt.float32)
    cv = api.cast(api.asvalue(n, op), pv.dtype)
    if shape is None:
        shp = _broadcast(op, tuple(cv.shape), tuple(pv.shape))
    else:
        shp = api._shape_arg(op, shape)
        _check_shape(op, shp, tuple(cv.shape), tuple(pv.shape))
    count, prob = api.broadcast_to(cv, shp), api.broadcast_to(pv, shp)
    k = _key_bits(op, key)
    lt_half = api.less(prob, 0.5)
    q = api.where(lt_half, prob, api.sub(1.0, prob))
    bad_count = composite.logical_or(composite.isnan(count), api.less(count, 0.0))
    inf_count = composite.isinf(count)
    q_nan, q_neg = composite.isnan(q), api.less(q, 0.0)
    q = api.where(composite.logical_or(q_nan, q_neg), 0.01, q)
    use_inversion = composite.logical_or(bad_count, api.less_equal(api.mul(count, q), 10.0))
    count = composite.floor(count)
    inv = _binomial_inversion(k, api.where(use_inversion, count, 0.0), q, shp)
    btrs = _btrs(k, api.where(use_inversion, 1e4, count), api.where(use_inversion, 0.5, q), shp)
    samples = api.where(use_inversion, inv, btrs)
    invalid = composite.logical_or(composite.logical_or(q_neg, q_nan), bad_count)
    samples = api.where(invalid, float("nan"), samples)
    samples = api.where(
        composite.logical_and(inf_count, composite.logical_not(invalid)), float("inf"), samples
    )
    keep = composite.logical_or(
        composite.logical_or(lt_half, bad_count), composite.logical_or(q_nan, inf_count)
    )
    return api.cast(api.where(keep, samples, api.sub(count, samples)), d)


def multinomial(
    key: Any, n: Any, p: Any, *, shape: Any = None, dtype: Any = None, unroll: int | bool = 1
) -> Any:
    """Multinomial counts of ``n`` trials over the categories of ``p`` (its last axis), as
    ``jax.random.multinomial`` (floats, as JAX's): category by category, a :func:`binomial`
    of the trials left with the category's share of the probability left, each with its own
    key of ``split(key, k)``, so the same counts. ``shape`` is the whole sample shape, the
    categories last (JAX's code; its docstring says without them); ``unroll`` is accepted
    for JAX's signature (the categories' loop always unrolls when traced).

    >>> import pypto as pto
    >>> pto.random.multinomial(pto.random.key(0), 10, pto.tensor([0.2, 0.3, 0.5])).numpy()
    array([1., 1., 8.], dtype=float32)
    """
    op = "random.multinomial"
    d = _float_dtype(op, dtype)
    if not isinstance(unroll, int | np.integer):  # (a bool is an int)
        raise DTypeError(f"unroll must be an int or a bool, got {unroll!r:.60}", op=op)
    nv, pv = api.promote(op, (n, p), inexact=True)
    if len(pv.shape) < 1:  # type: ignore[attr-defined]
        raise ShapeError(
            f"p needs an axis of categories, got {api._aval(pv)}",
            op=op,
            hint="give the probabilities of the outcomes along the last axis",
        )
    shp = tuple(pv.shape) if shape is None else api._shape_arg(op, shape)  # type: ignore[attr-defined]
    _check_shape(op, shp, tuple(pv.shape))  # type: ignore[attr-defined]
    _check_shape(op, shp[:-1], tuple(nv.shape))  # type: ignore[attr-defined]
    left = api.broadcast_to(nv, shp[:-1])
    prob = composite.moveaxis(api.broadcast_to(pv, shp), -1, 0)
    k = shp[-1]
    # each category's share of what is left: its probability over the sum from it on
    rest = composite.cumsum(prob, 0, reverse=True)
    ratios = api.div(prob, api.where(api.equal(rest, 0.0), 1.0, rest))
    keys = split(_key_bits(op, key), k)
    counts = []
    for i in range(k):
        ratio = composite.clip(api.getitem(ratios, i), 0.0, 1.0)
        c = binomial(api.getitem(keys, i), left, ratio, dtype=left.dtype)
        left = api.sub(left, c)
        counts.append(c)
    return api.cast(composite.stack(counts, len(shp) - 1), d)
