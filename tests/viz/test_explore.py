"""The Explorer: nine tabs, drawn lazily on first selection, each with real content."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import pytest

import pypto as pto
from pypto.viz.explore import TABS, Explorer

RNG = np.random.default_rng(3)
A = RNG.standard_normal((128, 256)).astype(np.float16)
B = RNG.standard_normal((256, 256)).astype(np.float16)


def mlp(x, w):
    return pto.relu(x @ w) * 0.5


@pytest.fixture(scope="module")
def ex() -> Explorer:
    return pto.viz.explore(pto.jit(mlp, machine="tiny"), A, B)


def _leaves(w: widgets.Widget) -> list[widgets.Widget]:
    if isinstance(w, widgets.Box):
        return [x for c in w.children for x in _leaves(c)]
    return [w]


def test_nine_tabs_only_the_first_drawn(ex: Explorer) -> None:
    assert isinstance(ex, widgets.Tab)
    assert ex.titles == TABS == (
        "Tensor", "Tile", "Block", "ISA", "Timeline", "Memory", "Tiles", "Roofline", "Numerics"
    )  # fmt: skip
    assert len(ex.children) == 9
    assert list(ex.rendered) == ["Tensor"] and ex._profile is None  # nothing simulated yet
    assert "drawn when selected" in ex.children[TABS.index("Roofline")].children[0].value


def test_every_tab_renders_content(ex: Explorer) -> None:
    for i, name in enumerate(TABS):
        ex.selected_index = i
        assert name in ex.rendered and ex.children[i].children == (ex.rendered[name],)
        leaves = _leaves(ex.rendered[name])
        assert leaves and not any("Error</b>" in getattr(w, "value", "") for w in leaves[:1]), name
        if name in ("Timeline", "Memory", "Tiles", "Roofline"):
            assert all(isinstance(w, widgets.Image) for w in leaves), name
            assert all(w.value[:4] == b"\x89PNG" for w in leaves), name
    html = {n: ex.rendered[n] for n in ("Tile", "Block", "ISA", "Numerics")}
    assert "<svg" in html["Tile"].value or "dot" in html["Tile"].value
    assert "kernel @" in html["Tile"].value  # the level's text rides along
    assert "block_func @mlp" in html["Block"].value
    assert "pto-pipe-M" in html["ISA"].value  # cube instructions, coloured by pipe
    assert "check mlp" in html["Numerics"].value and "FAIL" not in html["Numerics"].value
    tensor = _leaves(ex.rendered["Tensor"])
    assert "matmul" in tensor[0].value  # the graph
    assert any(isinstance(w, widgets.IntSlider) for w in tensor)  # the pass stepper
    assert ex.profile.outputs is None  # timing only: the numbers come from pto.check


def test_a_tab_draws_once(ex: Explorer) -> None:
    ex.render("Timeline")
    first = ex.rendered["Timeline"]
    ex.selected_index = TABS.index("Timeline")
    assert ex.render("Timeline") is first
    with pytest.raises(ValueError, match="no tab 'Graph'"):
        ex.render("Graph")


def test_text_form(ex: Explorer) -> None:
    text = ex._repr_mimebundle_()["text/plain"]
    assert text.startswith("Explorer of @mlp: tabs Tensor, Tile")
    assert "func @mlp" in text


def test_a_plain_function_is_jitted() -> None:
    ex = pto.viz.explore(lambda x: pto.exp(x), np.ones((16, 64), np.float32), machine="tiny")
    assert ex.f.machine == "tiny" and ex.lowered.tile_ir.kernels


def test_a_view_that_fails_says_so_in_its_tab() -> None:
    # x * 1.0 simplifies to x: there is no kernel, so nothing to profile, but IR to show
    ex = pto.viz.explore(lambda x: x * 1.0, np.ones((16, 64), np.float32), machine="tiny")
    ex.render_all()
    for name in ("Timeline", "Memory", "Tiles", "Roofline"):
        assert "PyptoError" in ex.rendered[name].value and "no kernel to run" in (
            ex.rendered[name].value
        )
    assert "check" in ex.rendered["Numerics"].value and "tile_func" in ex.rendered["Tile"].value


def test_interpret_backend_is_refused() -> None:
    with pytest.raises(pto.PyptoError, match="backend='interpret'"):
        pto.viz.explore(pto.jit(mlp, backend="interpret"), A, B)
