"""The %%pypto cell magic, in IPython's in-process shell."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell

import pypto as pto
from pypto.jupyter.magic import MagicError, cell_signature, parse_line


@pytest.fixture(scope="module")
def shell() -> InteractiveShell:
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "pypto")
    return sh


def test_signature_reads_inputs_before_assignment_and_assigned_outputs() -> None:
    ns = {"x": pto.ones(2), "w": np.ones(2), "n": 3, "y": pto.ones(2)}
    ins, outs = cell_signature("h = x * w + n\ny = h + y\nh += 1", ns)
    assert ins == ["x", "w", "y"] and outs == ["h", "y"]


def test_cell_runs_binds_outputs_and_reports(shell: InteractiveShell) -> None:
    shell.user_ns.update(pto=pto, x=pto.random.normal(0, (4, 8)), w=np.ones((8, 3), np.float32))
    report = shell.run_cell_magic(
        "pypto",
        "--show tensor,graph,tile,isa --check --machine tiny",
        "h = x @ w\ny = pto.softmax(h)",
    )
    ns = shell.user_ns
    np.testing.assert_array_equal(ns["y"].numpy(), pto.softmax(ns["x"] @ ns["w"]).numpy())
    bundle = report._repr_mimebundle_()
    text = bundle["text/plain"]
    assert "inputs ['x', 'w']" in text and "outputs ['h', 'y']" in text
    assert "func @cell" in text and "all outputs match JAX" in text
    assert "on backend 'npu'" in text and "tiny: " in text and "of the roofline" in text
    assert "kernel @" in text and ".program cell" in text  # the Tile IR and the ISA
    assert "<svg" in bundle["text/html"] or "graphviz" in bundle["text/html"]


def test_error_points_at_the_cells_line(shell: InteractiveShell) -> None:
    shell.user_ns.update(a=pto.ones((4, 3)))
    with pytest.raises(pto.ShapeError) as e:
        shell.run_cell_magic("pypto", "", "b = a * 2\nc = b @ b")
    assert "matmul" in str(e.value) and "f32[4,3]" in str(e.value)
    assert "<pypto-cell" in str(e.value) and ">:2" in str(e.value)


def test_bad_options_and_cells(shell: InteractiveShell) -> None:
    with pytest.raises(MagicError, match="unknown --show"):
        parse_line("--show nothing")
    with pytest.raises(MagicError, match="cannot read"):
        parse_line("--bogus")
    with pytest.raises(MagicError, match="assigns no names"):
        shell.run_cell_magic("pypto", "", "pto.exp(a)")
