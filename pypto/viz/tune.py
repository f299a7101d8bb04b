"""The Tuner: change a knob, watch the cycles move.

``tune(f, *args)`` returns a :class:`Tuner` widget with sliders and drop-downs for the vector
tile shape, the cube tile shapes, the machine and its number of clusters, double buffering and
swizzling. Every change recompiles ``f`` and times it on the simulated NPU (timing only, no
numbers computed) and updates the cycles, the efficiency and the timeline; a setting that does
not compile (a tile too large for its buffer) shows the error and keeps the last good view.

The work behind each change is a pure function, :func:`tune_once`, so sweeps and tests need no
frontend:

>>> import numpy as np, pypto as pto
>>> x = np.ones((64, 512), np.float32)
>>> f = lambda x: pto.exp(x) * 2
>>> r = tune_once(f, (x,), TuneSettings(machine="tiny", vec=(16, 512)))
>>> r.ok, r.cycles > 0, r.tiles["vec"]
(True, True, (16, 512))
>>> tune_once(f, (x,), TuneSettings(machine="tiny", vec=(64, 8192))).error  # doctest: +ELLIPSIS
'TileError: set_vec_tile_shapes: vector tile [64, 8192] ... needs ... bytes of UB; tiny has ...'
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import ipywidgets as widgets

from pypto.core.errors import PyptoError
from pypto.npu.machine import Machine
from pypto.npu.machine import machine as get_machine
from pypto.npu.profile import Profile
from pypto.tile.config import CubeTiles

__all__ = ["TuneResult", "TuneSettings", "Tuner", "tune", "tune_once"]

PRESETS = ("tiny", "ascend910b")
CUSTOM = "custom"
_POW2 = tuple(2**i for i in range(15))


@dataclass(frozen=True)
class TuneSettings:
    """One point of the tuning space.

    ``machine`` is a preset name or a :class:`~pypto.npu.Machine`; ``clusters`` (1 AIC + 2 AIV
    each) overrides its cluster count; ``vec`` is the vector tile ``(rows, cols)`` and ``cube``
    the matmul tiles ``([m0, m1], [k0, k1], [n0, n1])`` (None: chosen automatically);
    ``double_buffer``, ``swizzle``, ``read_ahead`` and ``split_k`` are the scheduling knobs of
    :mod:`pypto.tile.config`.

    >>> TuneSettings(machine="ascend910b", clusters=4).target().describe()  # doctest: +ELLIPSIS
    'ascend910b-4c: 4 AIC + 8 AIV at 1.85 GHz, ...'
    """

    machine: str | Machine = "tiny"
    clusters: int | None = None
    vec: tuple[int, int] | None = None
    cube: CubeTiles | None = None
    double_buffer: bool = True
    swizzle: int | None = None
    read_ahead: bool = True
    split_k: int | None = None

    def target(self) -> Machine:
        """The machine these settings run on."""
        m = get_machine(self.machine)
        if self.clusters is not None and self.clusters != m.clusters:
            m = m.replace(clusters=self.clusters, name=f"{m.name}-{self.clusters}c")
        return m

    def tile(self) -> dict[str, Any]:
        """The ``tile=`` argument of ``pto.jit`` for these settings."""
        return dict(
            vec=self.vec,
            cube=self.cube,
            double_buffer=self.double_buffer,
            swizzle=self.swizzle,
            read_ahead=self.read_ahead,
            split_k=self.split_k,
        )

    def __str__(self) -> str:
        base = get_machine(self.machine)
        own = self.clusters is None or self.clusters == base.clusters
        parts = [base.name + ("" if own else f" with {self.clusters} clusters")]
        parts.append(f"vec {list(self.vec)}" if self.vec else "vec auto")
        parts.append(f"cube {[list(t) for t in self.cube]}" if self.cube else "cube auto")
        parts.append(f"double buffering {'on' if self.double_buffer else 'off'}")
        parts.append(f"swizzle {self.swizzle or 'auto'}")
        if not self.read_ahead:
            parts.append("no read-ahead")
        if self.split_k is not None:
            parts.append(f"split K {self.split_k}")
        return ", ".join(parts)


@dataclass(frozen=True)
class TuneResult:
    """What one setting gave: the timing-only ``profile`` (None when it did not compile, and
    then ``error`` says why) and the tile shapes the kernels used (``tiles``)."""

    settings: TuneSettings
    profile: Profile | None = None
    error: str | None = None
    tiles: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.profile is not None

    @property
    def cycles(self) -> float:
        return self.profile.cycles if self.profile is not None else float("nan")

    @property
    def efficiency(self) -> float:
        return self.profile.efficiency if self.profile is not None else float("nan")

    def summary(self) -> str:
        """One line: cycles, time, efficiency and the bound — or the error."""
        p = self.profile
        if p is None:
            return f"{self.settings}: {self.error}"
        return (
            f"{self.settings}: {p.cycles:,.0f} cycles ({p.seconds * 1e6:,.2f} µs), "
            f"efficiency {p.efficiency:.1%} ({p.bound}-bound)"
        )


def _unwrap(f: Callable[..., Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The plain function under ``f`` and the jit options to keep (fusion, static arguments)."""
    from pypto.compiler import Jitted

    if isinstance(f, Jitted):
        return f.fn, dict(fuse=f.fuse, static_argnums=f.static_argnums)
    return f, {}


def _used_tiles(tile_ir: Any) -> dict[str, tuple[int, ...]]:
    """The first vector and the first cube tile the kernels use: ``vec`` (rows, cols) and
    ``cube`` (m0, m1, k0, k1, n0, n1)."""
    out: dict[str, tuple[int, ...]] = {}
    for k in tile_ir.kernels:
        t = dict(k.tile)
        if k.tile_kind == "vec_tile" and "vec" not in out and {"rows", "cols"} <= set(t):
            out["vec"] = (t["rows"], t["cols"])
        if k.tile_kind == "cube_tile" and "cube" not in out and {"m", "m0"} <= set(t):
            out["cube"] = (t["m0"], t["m"], t["k0"], t["k"], t["n0"], t["n"])
    return out


def tune_once(f: Callable[..., Any], args: Sequence[Any], settings: TuneSettings) -> TuneResult:
    """Compile ``f`` (a function or a jitted one) for ``args`` with ``settings`` and time it
    on the simulated NPU (``numerics=False``). A setting that does not compile or run gives a
    result with ``error`` (the exception's type and message) instead of a profile."""
    from pypto.compiler import jit

    fn, opts = _unwrap(f)
    try:
        j = jit(fn, machine=settings.target(), tile=settings.tile(), **opts)
        low = j.lower(*args)
        prof = j.profile(*args, numerics=False)
    except PyptoError as e:
        return TuneResult(settings, error=f"{type(e).__name__}: {e}")
    return TuneResult(settings, prof, tiles=_used_tiles(low.tile_ir))


def _png(profile: Profile) -> bytes:
    from pypto.viz.timeline import timeline

    fig = timeline(profile, width=10.0)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=72)
    return buf.getvalue()


def _options(value: int | None) -> list[int]:
    return sorted({*_POW2, *([value] if value else [])})


class Tuner(widgets.VBox):
    """The tuning widget (see :func:`tune`). Controls: ``machine``, ``clusters``,
    ``vec_auto``/``vec_rows``/``vec_cols``, ``cube_auto`` and ``cube[name]`` for ``m0 m1 k0 k1
    n0 n1``, ``double_buffer``, ``read_ahead``, ``swizzle``, ``split_k``. Read-outs: ``cycles``,
    ``efficiency``, ``error`` (empty when the last setting compiled) and ``image`` (the timeline
    PNG of the last good setting). ``result`` is the last :class:`TuneResult`, ``good`` the
    last one that ran; ``history`` every setting tried, in order.
    """

    def __init__(self, f: Callable[..., Any], args: Sequence[Any], settings: TuneSettings) -> None:
        self.f = f
        self.args = tuple(args)
        self._quiet = True
        self._cache: dict[TuneSettings, tuple[TuneResult, bytes | None]] = {}
        self.history: list[TuneResult] = []
        self.result: TuneResult | None = None
        self.good: TuneResult | None = None
        base = get_machine(settings.machine)
        self._custom = base if base.name not in PRESETS else get_machine("ascend910b")
        wide = {"style": {"description_width": "110px"}, "continuous_update": False}
        self.machine = widgets.Dropdown(
            options=[*PRESETS, CUSTOM],
            value=base.name if base.name in PRESETS else CUSTOM,
            description="machine",
            style=wide["style"],
        )
        self.clusters = widgets.IntSlider(
            value=settings.clusters or base.clusters,
            min=1,
            max=max(48, base.clusters),
            description="clusters",
            **wide,
        )
        self.cores = widgets.Label()
        self.vec_auto = widgets.Checkbox(value=settings.vec is None, description="auto vec tile")
        self.vec_rows = widgets.SelectionSlider(
            options=_options(settings.vec[0] if settings.vec else None),
            value=settings.vec[0] if settings.vec else 8,
            description="vec rows",
            **wide,
        )
        self.vec_cols = widgets.SelectionSlider(
            options=_options(settings.vec[1] if settings.vec else None),
            value=settings.vec[1] if settings.vec else 256,
            description="vec cols",
            **wide,
        )
        self.cube_auto = widgets.Checkbox(
            value=settings.cube is None, description="auto cube tiles"
        )
        flat = [d for pair in settings.cube for d in pair] if settings.cube else [128] * 6
        self.cube = {
            name: widgets.Dropdown(
                options=_options(v),
                value=v,
                description=name,
                layout=widgets.Layout(width="150px"),
                style={"description_width": "30px"},
            )
            for name, v in zip(("m0", "m1", "k0", "k1", "n0", "n1"), flat)
        }
        self.double_buffer = widgets.Checkbox(
            value=settings.double_buffer, description="double buffering"
        )
        self.read_ahead = widgets.Checkbox(value=settings.read_ahead, description="read ahead")
        bands = sorted({1, 2, 4, 8, 16, *([settings.swizzle] if settings.swizzle else [])})
        self.swizzle = widgets.Dropdown(
            options=[("auto", None), *((str(b), b) for b in bands)],
            value=settings.swizzle,
            description="swizzle (rows)",
            style=wide["style"],
        )
        runs = sorted(
            {1, 2, 3, 4, 6, 8, 12, 16, 24, *([settings.split_k] if settings.split_k else [])}
        )
        self.split_k = widgets.Dropdown(
            options=[("auto", None), *((str(r), r) for r in runs)],
            value=settings.split_k,
            description="split K (runs)",
            style=wide["style"],
        )
        self.cycles = widgets.Label()
        self.efficiency = widgets.Label()
        self.status = widgets.HTML()
        self.error = widgets.HTML()
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        for w in (self.machine, self.clusters, self.vec_rows, self.vec_cols):
            w.observe(self._changed, names="value")
        for w in (
            self.vec_auto,
            self.cube_auto,
            self.double_buffer,
            self.swizzle,
            self.read_ahead,
            self.split_k,
        ):
            w.observe(self._changed, names="value")
        for w in self.cube.values():
            w.observe(self._changed, names="value")
        c = self.cube
        super().__init__(
            [
                widgets.HBox([self.machine, self.clusters, self.cores]),
                widgets.HBox([self.vec_auto, self.vec_rows, self.vec_cols]),
                widgets.HBox(
                    [self.cube_auto, c["m0"], c["m1"], c["k0"], c["k1"], c["n0"], c["n1"]]
                ),
                widgets.HBox([self.double_buffer, self.read_ahead, self.swizzle, self.split_k]),
                widgets.HBox([self.cycles, self.efficiency]),
                self.status,
                self.error,
                self.image,
            ]
        )
        self._quiet = False
        self.update()

    def settings(self) -> TuneSettings:
        """The settings the controls show."""
        name = self.machine.value
        base: str | Machine = self._custom if name == CUSTOM else name
        c = {k: w.value for k, w in self.cube.items()}
        return TuneSettings(
            machine=base,
            clusters=self.clusters.value,
            vec=None if self.vec_auto.value else (self.vec_rows.value, self.vec_cols.value),
            cube=None
            if self.cube_auto.value
            else ((c["m0"], c["m1"]), (c["k0"], c["k1"]), (c["n0"], c["n1"])),
            double_buffer=self.double_buffer.value,
            swizzle=self.swizzle.value,
            read_ahead=self.read_ahead.value,
            split_k=self.split_k.value,
        )

    def _changed(self, change: dict[str, Any]) -> None:
        if self._quiet:
            return
        self._quiet = True
        try:
            owner = change["owner"]
            # moving a tile control means "use this tile": leave automatic mode
            if owner in (self.vec_rows, self.vec_cols):
                self.vec_auto.value = False
            if owner in self.cube.values():
                self.cube_auto.value = False
            if owner is self.machine and change["new"] in PRESETS:
                self.clusters.value = get_machine(change["new"]).clusters
            preset = self.machine.value in PRESETS
            if owner is self.clusters and preset and change["new"] != self._preset_clusters():
                self._custom = get_machine(self.machine.value)
                self.machine.value = CUSTOM
        finally:
            self._quiet = False
        self.update()

    def _preset_clusters(self) -> int:
        return get_machine(self.machine.value).clusters

    def update(self) -> TuneResult:
        """Recompile and time the controls' settings; refresh the read-outs (on an error:
        show it and keep the last good numbers and timeline)."""
        s = self.settings()
        m = s.target() if s.clusters and s.clusters > 0 else None
        if m is not None:
            self.cores.value = f"{m.n_aic + m.n_aiv} cores ({m.n_aic} AIC + {m.n_aiv} AIV)"
        self.status.value = f"<i>compiling: {html.escape(str(s))}…</i>"
        if s in self._cache:
            r, png = self._cache[s]
        else:
            try:
                r = tune_once(self.f, self.args, s)
                png = _png(r.profile) if r.profile is not None else None
            except Exception as e:  # an internal error is shown, not lost in the log
                r, png = TuneResult(s, error=f"{type(e).__name__}: {e}"), None
            self._cache[s] = (r, png)
        self.result = r
        self.history.append(r)
        self.status.value = f"<small>{html.escape(str(s))}</small>"
        if not r.ok:
            kept = " — showing the last good setting" if self.good is not None else ""
            self.error.value = (
                "<div style='color:#b00020'><b>this setting does not compile"
                f"{kept}</b><pre style='white-space:pre-wrap'>{html.escape(r.error or '')}"
                "</pre></div>"
            )
            return r
        prev = self.good
        self.good = r
        self.error.value = ""
        delta = ""
        if prev is not None and prev.cycles > 0 and prev.settings != s:
            delta = f" ({(r.cycles / prev.cycles - 1) * 100:+.1f}% vs the last good)"
        assert r.profile is not None
        self.cycles.value = f"cycles: {r.cycles:,.0f}{delta}"
        self.efficiency.value = (
            f"efficiency: {r.efficiency:.1%} ({r.profile.bound}-bound), "
            f"{r.profile.seconds * 1e6:,.2f} µs"
        )
        if png is not None:
            self.image.value = png
        self._show_tiles(r)
        return r

    def _show_tiles(self, r: TuneResult) -> None:
        """In automatic mode, move the tile controls to the tiles the compiler chose."""
        self._quiet = True
        try:
            vec = r.tiles.get("vec")
            self.vec_rows.disabled = self.vec_cols.disabled = vec is None and self.vec_auto.value
            if vec is not None and self.vec_auto.value:
                for w, v in zip((self.vec_rows, self.vec_cols), vec):
                    w.options = _options(v)
                    w.value = v
            cube = r.tiles.get("cube")
            for w in self.cube.values():
                w.disabled = cube is None and self.cube_auto.value
            if cube is not None and self.cube_auto.value:
                for w, v in zip(self.cube.values(), cube):
                    w.options = _options(v)
                    w.value = v
        finally:
            self._quiet = False

    def __str__(self) -> str:
        r = self.result
        return "Tuner: " + (r.summary() if r is not None else "not run")

    __repr__ = __str__

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = str(self)
        return bundle


def tune(f: Callable[..., Any], *args: Any, machine: str | Machine | None = None) -> Tuner:
    """A :class:`Tuner` for ``f`` (a function or a jitted one) at ``args``: change a tile
    shape, the machine, its clusters, double buffering or swizzling and see the cycles, the
    efficiency and the timeline move. ``machine`` defaults to the jitted function's (a plain
    function's: ``"ascend910b"``, as ``pto.jit``); its tile settings are the starting point.

    >>> import numpy as np, pypto as pto
    >>> t = tune(lambda x: pto.exp(x) * 2, np.ones((64, 512), np.float32), machine="tiny")
    >>> t.vec_rows.value = 4  # what dragging the slider does
    >>> t.result.settings.vec, t.error.value
    ((4, 512), '')
    """
    from pypto.compiler import Jitted
    from pypto.tile import config

    start = TuneSettings(machine=machine or "ascend910b")
    if isinstance(f, Jitted):
        cfg = config.parse(f.tile)
        vec = cfg.vec if cfg.vec is not None and len(cfg.vec) == 2 else None
        start = replace(
            start,
            machine=machine or f.machine,
            vec=(vec[0], vec[1]) if vec else None,
            cube=cfg.cube,
            double_buffer=cfg.double_buffer is not False,
            swizzle=cfg.swizzle,
            read_ahead=cfg.read_ahead is not False,
            split_k=cfg.split_k,
        )
    return Tuner(f, args, start)
