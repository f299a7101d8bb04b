"""Every public object shows itself in a notebook: a MIME bundle with text/plain and HTML."""

from __future__ import annotations

from typing import Any

import pytest

import pypto as pto

X = pto.random.normal(0, (32, 64), pto.float16)


def objects() -> dict[str, Any]:
    f = pto.jit(lambda x: pto.softmax(x, -1), machine="tiny")
    low = f.lower(X)
    return {
        "Tensor": X,
        "Lowered": low,
        "Tensor IR": low.tensor_ir,
        "Tile IR": low.tile_ir,
        "Block IR": low.block_ir,
        "ISA": low.isa,
        "Profile": f.profile(X),
        "Machine": pto.npu.machine("ascend910b"),
        "CheckReport": pto.check(lambda x: pto.exp(x), X, verbose=False),
    }


@pytest.mark.parametrize("name", list(objects()))
def test_rich_display_has_text_and_html(name: str) -> None:
    obj = objects()[name]
    b = obj._repr_mimebundle_()
    assert b["text/plain"].strip() and b["text/html"].strip()
    assert "<" in b["text/html"]


def test_the_displays_carry_the_content() -> None:
    o = objects()
    low = o["Lowered"]._repr_mimebundle_()["text/html"]
    for level in ("Tensor IR", "Tile IR", "Block IR", "PTO ISA"):
        assert level in low
    assert "trowmax" in low and "TROWMAX" in low
    prof = o["Profile"]._repr_mimebundle_()
    assert "efficiency" in prof["text/html"] and "cycles" in prof["text/plain"]
    assert "24 AIC (cube) + 48 AIV" in o["Machine"]._repr_mimebundle_()["text/html"]
    assert "all outputs match JAX" in o["CheckReport"]._repr_mimebundle_()["text/plain"]
