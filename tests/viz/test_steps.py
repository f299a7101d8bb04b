"""The pass stepper: it walks every tensor pass, and what it highlights is what the pass changed."""

from __future__ import annotations

import numpy as np
import pytest

import pypto as pto
from pypto.viz.steps import line_diff


def f(x, w):
    y = x * 1.0 + 0.0  # simplify removes both
    return pto.relu(y @ w) + pto.relu(y @ w)  # cse merges the repeat


@pytest.fixture(scope="module")
def lowered() -> object:
    x = np.ones((32, 64), np.float16)
    return pto.jit(f, machine="tiny").lower(x, x.T.copy(), snapshots=True)


def test_walks_every_pass(lowered) -> None:
    s = pto.viz.steps(lowered)
    names = [sn.name for sn in lowered.snapshots]
    assert len(s) == len(names) and s.slider.max == len(names) - 1
    seen = []
    s.show(0)
    for i in range(len(names)):
        assert s.slider.value == i
        seen.append(s.header.value)
        assert f"pass {i + 1} of {len(names)}: {names[i]}" in s.header.value
        assert s.listing.value.startswith("<pre")
        s.next.click()
    assert s.slider.value == len(names) - 1  # next stops at the last pass
    s.back.click()
    assert s.slider.value == len(names) - 2
    assert len(set(seen)) == len(names)


def test_highlights_what_changed(lowered) -> None:
    s = pto.viz.steps(lowered)
    cse = [sn.name for sn in s.snapshots].index("cse")
    snap = s.snapshots[cse]
    assert snap.changed
    s.show(cse)
    diff = line_diff(snap.before, snap.after)
    removed = [line for t, line in diff if t == "-"]
    assert removed and all(line.strip() in snap.before for line in removed)
    # every removed line is struck through in the listing, every kept line is plain
    assert s.listing.value.count("pto-diff-del") == len(removed)
    assert s.listing.value.count("pto-diff-eq") == sum(t == " " for t, _ in diff)
    assert "no change" not in s.header.value
    unchanged = next(i for i, sn in enumerate(s.snapshots) if not sn.changed)
    s.show(unchanged)
    assert "no change" in s.header.value and "pto-diff-add" not in s.listing.value


def test_text_outside_notebooks(lowered) -> None:
    s = pto.viz.steps(lowered)
    text = str(s)
    for i, sn in enumerate(s.snapshots):
        assert f"pass {i + 1} of {len(s)}: {sn.name}" in text
    bundle = s._repr_mimebundle_()
    assert bundle["text/plain"] == text
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_takes_a_function_and_its_arguments() -> None:
    s = pto.viz.passes(lambda x: pto.exp(x) + 0.0, pto.ones(4))
    assert [sn.name for sn in s.snapshots][-1] == "fuse"


def test_needs_snapshots() -> None:
    low = pto.jit(lambda x: pto.exp(x), machine="tiny").lower(pto.ones((8, 32)))
    with pytest.raises(ValueError, match="snapshots=True"):
        pto.viz.steps(low)
