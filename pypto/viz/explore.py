"""The Explorer: every level and every view of one compiled function, a tab each.

``explore(f, *args)`` returns an :class:`Explorer`, an ``ipywidgets.Tab`` with the tabs Tensor
(the graph and the pass-by-pass stepper), Tile, Block (their graphs and texts), ISA (the
listing), Timeline, Memory, Tiles, Roofline (the Profile's views) and Numerics (the function
against JAX, :func:`pypto.check`). A tab is drawn the first time it is selected, so opening the
Explorer costs one compile; the profile is simulated when a profile tab is first shown.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets

from pypto.core.errors import PyptoError

__all__ = ["TABS", "Explorer", "explore"]

TABS = ("Tensor", "Tile", "Block", "ISA", "Timeline", "Memory", "Tiles", "Roofline", "Numerics")
_SCROLL = "max-height:640px;overflow:auto"


def _pre(text: str) -> str:
    return f"<pre style='font-size:12px;{_SCROLL}'>{html.escape(text)}</pre>"


def _graph_html(view: Any) -> str:
    """A GraphView as inline SVG (or its text fallback), with the level's text folded below."""
    bundle = view._repr_mimebundle_()
    svg = bundle.get("image/svg+xml")
    if svg is None:
        body = bundle["text/html"]
    else:
        body = f"<div style='{_SCROLL}'>{svg[svg.find('<svg') :]}</div>"
    return body + f"<details><summary>text</summary>{_pre(view.text)}</details>"


def _image(fig: Any) -> widgets.Image:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return widgets.Image(
        value=buf.getvalue(), format="png", layout=widgets.Layout(max_width="100%")
    )


def _error(e: Exception) -> widgets.HTML:
    name = type(e).__name__
    return widgets.HTML(
        f"<div style='color:#b00020'><b>{html.escape(name)}</b>"
        f"<pre style='white-space:pre-wrap'>{html.escape(str(e))}</pre></div>"
    )


class Explorer(widgets.Tab):
    """The tabs of :func:`explore`. ``render(name)`` draws a tab now (it is what selecting it
    does) and returns its content; ``rendered`` names the tabs drawn so far; ``lowered`` and
    ``profile`` are the lowering (with pass snapshots) and the timing-only profile behind them.
    """

    def __init__(self, f: Any, args: Sequence[Any]) -> None:
        self.f = f
        self.args = tuple(args)
        self.rendered: dict[str, widgets.Widget] = {}
        self._lowered: Any = None
        self._profile: Any = None
        self.boxes = {
            name: widgets.VBox([widgets.HTML(f"<i>{name}: drawn when selected</i>")])
            for name in TABS
        }
        super().__init__(children=[self.boxes[n] for n in TABS], titles=list(TABS))
        self.observe(self._selected, names="selected_index")
        self.render(TABS[0])

    @property
    def lowered(self) -> Any:
        if self._lowered is None:
            self._lowered = self.f.lower(*self.args, snapshots=True)
        return self._lowered

    @property
    def profile(self) -> Any:
        if self._profile is None:
            self._profile = self.f.profile(*self.args, numerics=False)
        return self._profile

    def _selected(self, change: dict[str, Any]) -> None:
        if change["new"] is not None:
            self.render(TABS[change["new"]])

    def render(self, name: str) -> widgets.Widget:
        """Draw tab ``name`` (once) and return its content; an error becomes the content."""
        if name not in TABS:
            raise ValueError(f"no tab {name!r}; tabs: {', '.join(TABS)}")
        if name not in self.rendered:
            try:
                content = self._draw(name)
            except Exception as e:  # a view that cannot be drawn says why, in its tab
                content = _error(e)
            self.rendered[name] = content
            self.boxes[name].children = [content]
        return self.rendered[name]

    def render_all(self) -> None:
        """Draw every tab (for a static export, or to time them)."""
        for name in TABS:
            self.render(name)

    def _draw(self, name: str) -> widgets.Widget:
        from pypto import viz

        low = self.lowered
        if name == "Tensor":
            graph = widgets.HTML(_graph_html(viz.graph(low)))
            return widgets.VBox([graph, widgets.HTML("<b>tensor passes</b>"), viz.steps(low)])
        if name in ("Tile", "Block"):
            return widgets.HTML(_graph_html(viz.graph(low, level=name.lower())))
        if name == "ISA":
            return widgets.HTML(f"<div style='{_SCROLL}'>{viz.isa(low).html}</div>")
        if name == "Timeline":
            return _image(viz.timeline(self.profile))
        if name == "Memory":
            return _image(viz.memory(self.profile))
        if name == "Tiles":
            outs = [t for t, _ in low.tile_ir.outputs]
            return widgets.VBox([_image(viz.tiles(self.profile, t)) for t in outs[:4]])
        if name == "Roofline":
            return _image(viz.roofline(self.profile))
        return widgets.HTML(self._numerics())

    def _numerics(self) -> str:
        from pypto.core.errors import NumericsMismatch
        from pypto.reference.jax_bridge import check

        try:
            report = check(self.f.fn, *self.args, verbose=False, machine=self.f.machine)
        except NumericsMismatch as e:
            return f"<div style='color:#b00020'><b>numerics differ from JAX</b>{_pre(str(e))}</div>"
        return report._repr_html_()

    def __str__(self) -> str:
        drawn = ", ".join(self.rendered) or "none"
        return (
            f"Explorer of @{self.lowered.traced.name}: tabs {', '.join(TABS)} "
            f"(drawn: {drawn})\n{self.lowered.tensor_ir}"
        )

    __repr__ = __str__

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = str(self)
        return bundle


def explore(f: Callable[..., Any], *args: Any, machine: Any = None) -> Explorer:
    """An :class:`Explorer` of ``f`` at ``args``: a jitted function as it is, a plain one
    jitted here (on ``machine``, default ``"ascend910b"`` as ``pto.jit``; ``machine`` also
    retargets a jitted function).

    >>> import numpy as np, pypto as pto
    >>> ex = explore(lambda x: pto.softmax(x), np.ones((32, 256), np.float32), machine="tiny")
    >>> ex.titles[:4], list(ex.rendered)
    (('Tensor', 'Tile', 'Block', 'ISA'), ['Tensor'])
    >>> ex.selected_index = 4  # what clicking the Timeline tab does
    >>> type(ex.rendered["Timeline"]).__name__
    'Image'
    """
    from pypto.compiler import Jitted, jit

    if isinstance(f, Jitted):
        if machine is not None and machine != f.machine:
            f = Jitted(
                f.fn,
                machine=machine,
                tile=f.tile,
                fuse=f.fuse,
                static_argnums=f.static_argnums,
                backend=f.backend,
            )
    elif callable(f):
        f = jit(f, machine=machine or "ascend910b")
    else:
        raise TypeError(f"explore() takes a function or a jitted one, not {type(f).__name__}")
    assert isinstance(f, Jitted)
    if f.backend != "npu":
        raise PyptoError(
            f"explore() shows the NPU levels; this function is jitted with backend={f.backend!r}",
            op="explore",
            hint="jit it with the default backend='npu'",
        )
    return Explorer(f, args)
