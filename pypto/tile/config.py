"""Tile shapes chosen by the user: global settings, a context manager and per-jit overrides.

``vec`` is a tile shape for vector kernels: its last entry is the tile's columns, the product of
the others its rows (of the kernel's 2-D view). ``cube`` is ``([m0, m1], [k0, k1], [n0, n1])``:
the L0 and L1 tile sizes of matmuls (each L1 size a multiple of its L0 size).

``attn`` is ``(bq, bk)``, ``(bq, bk, g)`` or ``(bq, bk, g, s)`` for flash attention: query
rows per tile, K/V rows per step, query tiles per grid point (``g=2``: a pair shares each K/V
load) and runs of K/V steps each grid point's keys split into (``s > 1``: on several clusters,
combined afterwards; without ``s`` the compiler splits a grid too small for the clusters). A
step wider than L0 holds runs as several cube products (``kc`` in the kernel header, chosen by
the compiler).

Four scheduling knobs ride along (per jit only, ``tile=dict(...)``): ``double_buffer=False``
gives every tile a single buffer (no ping-pong: loads wait for the compute on the previous
tile), and ``swizzle=G`` sets the band height of a matmul's grouped tile order — output tiles
walked in bands of ``G`` tile rows, column by column inside a band (the largest divisor of the
tile rows up to ``G``), so the clusters working at once share operand blocks in L2;
``swizzle=1`` is row-major order. ``read_ahead=False`` keeps the vector cores of a matmul
from reading its operand blocks into L2 ahead of the cube (by default they do, where the order
and the sizes allow: :mod:`pypto.tile.matmul`). ``split_k=S`` cuts a matmul's K into ``S`` runs
of whole K blocks, each on its own cluster, whose float32 partial products a vector kernel adds
up (``split_k=1``: never; by default the compiler splits a product whose output tiles are too
few to keep the clusters busy and whose K is long). By default buffers are doubled where they
fit and the band is about √clusters tall.

>>> import pypto as pto
>>> with pto.tile_shapes(vec=(8, 256)):
...     pto.tile.config.current().vec
(8, 256)
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pypto.core import hints
from pypto.core.errors import TileError

__all__ = [
    "CubeTiles",
    "TileConfig",
    "current",
    "from_hint",
    "hint",
    "set_cube_tile_shapes",
    "set_vec_tile_shapes",
    "tile_shapes",
]

CubeTiles = tuple[tuple[int, int], tuple[int, int], tuple[int, int]]


@dataclass(frozen=True)
class TileConfig:
    """Tile shapes in force; ``None`` means chosen automatically to fit the buffers."""

    vec: tuple[int, ...] | None = None
    cube: CubeTiles | None = None
    double_buffer: bool | None = None
    swizzle: int | None = None
    attn: tuple[int, int, int, int] | None = None
    """(bq, bk, g, s); s = 0: the split of the keys is the compiler's choice"""
    read_ahead: bool | None = None
    split_k: int | None = None
    """K runs of a matmul (1: unsplit); None: the compiler's choice"""

    def merged(self, other: TileConfig) -> TileConfig:
        return TileConfig(
            vec=other.vec if other.vec is not None else self.vec,
            cube=other.cube if other.cube is not None else self.cube,
            double_buffer=(
                other.double_buffer if other.double_buffer is not None else self.double_buffer
            ),
            swizzle=other.swizzle if other.swizzle is not None else self.swizzle,
            attn=other.attn if other.attn is not None else self.attn,
            read_ahead=other.read_ahead if other.read_ahead is not None else self.read_ahead,
            split_k=other.split_k if other.split_k is not None else self.split_k,
        )


_GLOBAL = TileConfig()
_CTX: contextvars.ContextVar[TileConfig | None] = contextvars.ContextVar(
    "pypto_tiles", default=None
)


def _vec(dims: Sequence[Any]) -> tuple[int, ...]:
    if len(dims) == 1 and isinstance(dims[0], list | tuple):
        dims = tuple(dims[0])
    out = tuple(dims)
    if not out or any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in out):
        raise TileError(
            f"vector tile shape {list(out)} must be positive integers",
            op="set_vec_tile_shapes",
            hint="e.g. pto.set_vec_tile_shapes(8, 1024)",
        )
    return out


def _cube(m: Sequence[int], k: Sequence[int], n: Sequence[int]) -> CubeTiles:
    out = []
    for name, v in (("m", m), ("k", k), ("n", n)):
        t = tuple(v)
        if len(t) != 2 or any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in t):
            raise TileError(
                f"cube tile {name}={list(t)} must be [L0, L1], two positive integers",
                op="set_cube_tile_shapes",
                hint="e.g. pto.set_cube_tile_shapes([128, 128], [64, 256], [256, 256])",
            )
        if t[1] % t[0]:
            raise TileError(
                f"cube tile {name}: the L1 size {t[1]} is not a multiple of the L0 size {t[0]}",
                op="set_cube_tile_shapes",
                hint=f"use [{t[0]}, {t[1] - t[1] % t[0] or t[0]}]",
            )
        out.append((t[0], t[1]))
    return (out[0], out[1], out[2])


def _attn(v: Any) -> tuple[int, int, int, int]:
    t = tuple(v) if isinstance(v, list | tuple) else (v,)
    ok = len(t) in (2, 3, 4) and all(
        not isinstance(d, bool) and isinstance(d, int) and d > 0 for d in t
    )
    if not ok or (len(t) >= 3 and t[2] not in (1, 2)):
        raise TileError(
            f"attention tiles attn={v!r} must be (bq, bk), (bq, bk, g) or (bq, bk, g, s), "
            "positive integers with g (query tiles per grid point) 1 or 2 and s the runs "
            "each point's keys split into",
            op="jit",
            hint="e.g. tile=dict(attn=(128, 128, 2))",
        )
    return (t[0], t[1], t[2] if len(t) >= 3 else 1, t[3] if len(t) == 4 else 0)


def set_vec_tile_shapes(*dims: int) -> None:
    """Set the vector tile shape for every later compile (``None``-like reset: no arguments is
    an error; use :func:`reset_tile_shapes`)."""
    global _GLOBAL
    _GLOBAL = replace(_GLOBAL, vec=_vec(dims))


def set_cube_tile_shapes(m: Sequence[int], k: Sequence[int], n: Sequence[int]) -> None:
    """Set the matmul tile sizes ``[L0, L1]`` for m, k and n for every later compile."""
    global _GLOBAL
    _GLOBAL = replace(_GLOBAL, cube=_cube(m, k, n))


def reset_tile_shapes() -> None:
    """Back to automatic tile shapes."""
    global _GLOBAL
    _GLOBAL = TileConfig()


def parse(tile: Any) -> TileConfig:
    """A ``tile=`` argument of ``pto.jit``: a TileConfig, a dict with ``vec``/``cube``/``attn``
    (and the scheduling knobs ``double_buffer``/``swizzle``/``read_ahead``/``split_k``), or
    None.

    >>> cfg = parse(dict(vec=(8, 256), double_buffer=False, swizzle=4, split_k=2))
    >>> cfg.vec, cfg.double_buffer, cfg.swizzle, cfg.split_k, cfg.cube
    ((8, 256), False, 4, 2, None)
    >>> parse(dict(attn=(128, 64))).attn  # (bq, bk, g, s): s = 0, the compiler's split
    (128, 64, 1, 0)
    """
    if tile is None:
        return TileConfig()
    if isinstance(tile, TileConfig):
        return tile
    if isinstance(tile, dict):
        known = {"vec", "cube", "double_buffer", "swizzle", "attn", "read_ahead", "split_k"}
        bad = set(tile) - known
        if bad:
            raise TileError(
                f"unknown tile setting {sorted(bad)}",
                op="jit",
                hint="use vec=..., cube=..., attn=..., double_buffer=..., swizzle=..., "
                "read_ahead=... and split_k=...",
            )
        attn = _attn(tile["attn"]) if tile.get("attn") is not None else None
        vec = _vec(tuple(tile["vec"])) if tile.get("vec") is not None else None
        cube = _cube(*tile["cube"]) if tile.get("cube") is not None else None
        db = tile.get("double_buffer")
        ra = tile.get("read_ahead")
        for name, v in (("double_buffer", db), ("read_ahead", ra)):
            if v is not None and not isinstance(v, bool):
                raise TileError(f"{name}={v!r} is not True or False", op="jit")
        sw = _positive(
            "swizzle",
            tile.get("swizzle"),
            "swizzle=1 is row-major order; swizzle=4 walks bands of 4 tile rows",
        )
        sk = _positive(
            "split_k",
            tile.get("split_k"),
            "split_k=1 keeps each matmul's K on one cluster; split_k=4 cuts it in 4 runs",
        )
        return TileConfig(vec, cube, db, sw, attn, ra, sk)
    raise TileError(
        f"tile={tile!r} is not a tile setting",
        op="jit",
        hint="pass tile=dict(vec=(8, 1024), cube=([128, 128], [64, 256], [256, 256]))",
    )


def _positive(name: str, v: Any, hint: str) -> int | None:
    """``v`` when it is None or a positive integer (a bool is not), else a TileError."""
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
        raise TileError(f"{name}={v!r} is not a positive integer", op="jit", hint=hint)
    return v


def _tile_arg(tile: Any) -> TileConfig:
    """``tile=`` of :func:`hint`: vec dims ``(8, 256)``, cube ``([m0, m1], [k0, k1], [n0, n1])``,
    or what ``pto.jit(tile=...)`` takes."""
    if isinstance(tile, tuple | list):
        if len(tile) == 3 and all(isinstance(t, tuple | list) for t in tile):
            return TileConfig(cube=_cube(*tile))
        return TileConfig(vec=_vec(tuple(tile)))
    return parse(tile)


def hint(
    tile: Any = None, cores: int | None = None, swizzle: int | None = None
) -> contextlib.AbstractContextManager[tuple[tuple[str, Any], ...]]:
    """Lowering overrides for the ops traced inside the block, kept on their equations.

    The kernel an op fuses into is lowered with them: ``tile=`` its tile shape (vec dims for a
    vector kernel, ``([m0, m1], [k0, k1], [n0, n1])`` for a matmul, or a ``pto.jit(tile=...)``
    dict), ``cores=`` how many cores its grid is spread over (vector cores for a vector
    kernel, clusters for a cube kernel), ``swizzle=`` the band height of a matmul's tile
    order. Blocks nest: the inner one wins for the keys it sets.

    >>> import pypto as pto
    >>> with pto.hint(tile=(2, 64), cores=2):
    ...     print(pto.make_graph(lambda x: pto.exp(x))(pto.ones((4, 64))))  # doctest: +ELLIPSIS
    func @lambda(%x: f32[4,64]) -> (f32[4,64]) {
      %0: f32[4,64] = exp %x hint(cores=2, vec=(2, 64))         # ...
      return %0
    }
    """
    h: dict[str, Any] = {}
    if tile is not None:
        cfg = _tile_arg(tile)
        h.update(
            (k, v)
            for k, v in (
                ("vec", cfg.vec),
                ("cube", cfg.cube),
                ("double_buffer", cfg.double_buffer),
                ("swizzle", cfg.swizzle),
                ("attn", cfg.attn),
                ("read_ahead", cfg.read_ahead),
                ("split_k", cfg.split_k),
            )
            if v is not None
        )
    if swizzle is not None:
        h["swizzle"] = parse(dict(swizzle=swizzle)).swizzle
    if cores is not None:
        if isinstance(cores, bool) or not isinstance(cores, int) or cores <= 0:
            raise TileError(
                f"cores={cores!r} is not a positive integer",
                op="hint",
                hint="cores=8 spreads the kernel's grid over 8 cores",
            )
        h["cores"] = cores
    # checked here, at the user's `with` line; the block itself only sets the context
    return hints.hinted(tuple(sorted(h.items())))


def from_hint(h: tuple[tuple[str, Any], ...]) -> TileConfig:
    """The tile settings of an equation's hint (``cores`` is the lowering's own business)."""
    d = dict(h)
    return TileConfig(
        d.get("vec"),
        d.get("cube"),
        d.get("double_buffer"),
        d.get("swizzle"),
        d.get("attn"),
        d.get("read_ahead"),
        d.get("split_k"),
    )


def current() -> TileConfig:
    """The tile shapes in force: the innermost ``tile_shapes`` block over the global ones."""
    ctx = _CTX.get()
    return _GLOBAL if ctx is None else _GLOBAL.merged(ctx)


@contextlib.contextmanager
def tile_shapes(
    vec: Sequence[int] | None = None,
    cube: tuple[Sequence[int], Sequence[int], Sequence[int]] | None = None,
) -> Iterator[TileConfig]:
    """Tile shapes for the compiles inside the block (nested blocks override outer ones)."""
    cfg = TileConfig(
        vec=_vec(tuple(vec)) if vec is not None else None,
        cube=_cube(*cube) if cube is not None else None,
    )
    outer = _CTX.get()
    token = _CTX.set(cfg if outer is None else outer.merged(cfg))
    try:
        yield current()
    finally:
        _CTX.reset(token)
