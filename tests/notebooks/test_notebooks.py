"""Every notebook in notebooks/ runs clean with a real kernel (nbclient), and shows what it says
it shows: after the last cell a probe cell reads the notebook's own variables and the test
checks the facts each notebook is about (the magic bound its outputs, double buffering saves
cycles, the training loss falls, fusion cuts HBM traffic, the roofline moves with the machine).
The committed copies carry their outputs, from a clean run."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .conftest import NOTEBOOKS

NAMES = [
    "01_quickstart",
    "02_tiling_and_tuning",
    "03_autodiff_training",
    "04_flash_attention",
    "05_custom_machine",
    "06_writing_kernels",
]

# Run after the notebook's own cells, in its kernel; prints one JSON line of facts.
PROBES = {
    "01_quickstart": """
facts = dict(
    out_type=type(out).__name__, out_shape=list(out.shape), out_dtype=str(out.dtype),
    h2_shape=list(h2.shape),
    magic_equals_jit=bool(np.array_equal(np.asarray(out), np.asarray(y))),
    eager_vs_npu=float(np.abs(np.asarray(y, np.float32) - np.asarray(y_eager, np.float32)).max()),
    efficiency=prof.efficiency, explorer_tabs=list(explorer.titles),
)
""",
    "02_tiling_and_tuning": """
facts = dict(
    single=single.cycles, double=double.cycles,
    smallest_cube=cube_profiles["m0=32 k0=32 n0=32"].cycles, auto_cube=cube_profiles["auto"].cycles,
    rowmajor_hbm=rowmajor.hbm_bytes, banded_hbm=banded.hbm_bytes,
    rowmajor=rowmajor.cycles, banded=banded.cycles, tuner_double_buffer=tuner.double_buffer.value,
)
""",
    "03_autodiff_training": """
ref = jax.grad(pto.to_jax(loss))(params, X, Y)
_, now = step(params, X, Y)
facts = dict(
    first=losses[0], last=losses[-1], steps=len(losses), accuracy=accuracy,
    grad_err=max(float(np.abs(np.asarray(now[k]) - np.asarray(ref[k])).max()) for k in params),
)
""",
    "04_flash_attention": """
facts = dict(
    fused_vs_unfused=float(np.abs(out_f - out_u).max()),
    kernels_fused=len(low_f.tile_ir.kernels), kernels_unfused=len(low_u.tile_ir.kernels),
    runs={f"{m}/{n}": [p.cycles, p.hbm_bytes] for (m, n), p in profiles.items()},
)
""",
    "05_custom_machine": """
facts = {f"{m}/{fn}": [p.seconds, p.roofline_cycles / p.machine.clock_ghz, p.bound]
         for (m, fn), p in runs.items()}
""",
    "06_writing_kernels": """
facts = dict(
    interp_vs_npu=float(np.abs(np.asarray(prof.outputs[0], np.float32)
                               - 2 * np.asarray(y_interp, np.float32)).max()),
    softmax_err=float(np.abs(np.asarray(y_interp, np.float32)
                             - np.asarray(pto.softmax(x), np.float32)).max()),
    hand_vs_compiled=float(diff), hand_cycles=p_hand.cycles, compiled_cycles=p_comp.cycles,
    kernels=[k.name for k in low.tile_ir.kernels],
    block_err=float(np.abs(np.asarray(y) - want).max()), grad_err=grad_err,
)
""",
}
PROBE_TAIL = "\nimport json as _json\nprint('PROBE ' + _json.dumps(facts))\n"


def test_the_notebooks_are_the_six_documented() -> None:
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebook_carries_clean_outputs(name: str) -> None:
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), f"{name}: not executed top to bottom"
    for c in code:
        for o in c.outputs:
            assert o.output_type != "error", f"{name}: committed with an error: {o.get('ename')}"
            assert o.get("name") != "stderr", f"{name}: committed with stderr: {o.get('text')}"
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs)


def _execute(name: str, tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    """Run a copy of the notebook (outputs cleared, probe appended) in a fresh kernel."""
    from nbclient import NotebookClient

    src = tmp_path / f"{name}.ipynb"
    shutil.copy(NOTEBOOKS / f"{name}.ipynb", src)
    nb = nbformat.read(src, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    nb.cells.append(nbformat.v4.new_code_cell(PROBES[name] + PROBE_TAIL))
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=300,
        startup_timeout=120,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    line = next(
        ln
        for o in nb.cells[-1].outputs
        if o.output_type == "stream"
        for ln in o.text.splitlines()
        if ln.startswith("PROBE ")
    )
    return nb, json.loads(line[len("PROBE ") :])


def _outputs(nb: Any, source_start: str) -> list[Any]:
    """The outputs of the code cell whose source starts with ``source_start``."""
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith(source_start))
    return list(cell.outputs)


def _mimes(outputs: list[Any]) -> set[str]:
    return {m for o in outputs for m in o.get("data", {})}


def _text(outputs: list[Any]) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs)


@pytest.mark.notebooks
def test_01_quickstart(jupyter_path: Path, tmp_path: Path) -> None:
    nb, facts = _execute("01_quickstart", tmp_path)
    # the %%pypto magic bound both names the cell assigns, as NPU results equal to f(x, w)
    assert facts["out_type"] == "Tensor" and facts["out_shape"] == [64, 64]
    assert facts["out_dtype"] == "float16" and facts["h2_shape"] == [64, 64]
    assert facts["magic_equals_jit"] is True
    assert facts["eager_vs_npu"] <= 1e-3
    magic = _outputs(nb, "%%pypto")
    report = next(o for o in magic if "text/html" in o.get("data", {}))
    assert "inputs ['x', 'w'] → outputs ['h2', 'out']" in report["data"]["text/plain"]
    assert "all outputs match JAX" in report["data"]["text/plain"]
    assert "<svg" in report["data"]["text/html"] or not shutil.which("dot")
    # the levels print, the graph and timeline draw, the profile and check report
    assert "func @layer(" in _text(_outputs(nb, "low = f.lower"))
    assert "tile_func @layer" in _text(_outputs(nb, "print(low.tile_ir)"))
    graph = _mimes(_outputs(nb, "pto.viz.graph(low)"))
    assert "image/svg+xml" in graph or (not shutil.which("dot") and "text/html" in graph)
    assert "image/png" in _mimes(_outputs(nb, "pto.viz.timeline(prof)"))
    assert "all outputs match JAX" in _text(_outputs(nb, "pto.check(layer"))
    assert 0 < facts["efficiency"] <= 1
    explorer = _outputs(nb, "explorer = pto.viz.explore")
    assert "application/vnd.jupyter.widget-view+json" in _mimes(explorer)
    assert facts["explorer_tabs"][:4] == ["Tensor", "Tile", "Block", "ISA"]


@pytest.mark.notebooks
def test_02_tiling_and_tuning(jupyter_path: Path, tmp_path: Path) -> None:
    nb, facts = _execute("02_tiling_and_tuning", tmp_path)
    assert facts["double"] < 0.8 * facts["single"]  # ping-pong overlaps loads with compute
    assert facts["smallest_cube"] > 2 * facts["auto_cube"]
    # with a 4 MiB L2, banded tile order moves less through HBM than row-major
    assert facts["banded_hbm"] < 0.9 * facts["rowmajor_hbm"]
    assert facts["banded"] < facts["rowmajor"]
    assert facts["tuner_double_buffer"] is True
    assert "hint: a tile that fits" in _text(_outputs(nb, "try:"))
    table = _text(_outputs(nb, "x = rng.standard_normal"))
    assert "vec=(1, 512)" in table and "vec=(8, 512)" in table
    assert "double buffering off" in _text(_outputs(nb, "print(tuner.cycles.value"))


@pytest.mark.notebooks
def test_03_autodiff_training(jupyter_path: Path, tmp_path: Path) -> None:
    nb, facts = _execute("03_autodiff_training", tmp_path)
    assert facts["steps"] >= 30
    assert facts["last"] < 0.5 * facts["first"], "the training loss did not fall"
    assert facts["accuracy"] >= 0.9
    assert facts["grad_err"] <= 1e-5, "pto.grad on the NPU differs from jax.grad"
    assert "all outputs match JAX" in _text(_outputs(nb, "pto.check(pto.grad"))
    assert "image/png" in _mimes(_outputs(nb, "fig, (ax0, ax1)"))


@pytest.mark.notebooks
def test_04_flash_attention(jupyter_path: Path, tmp_path: Path) -> None:
    nb, facts = _execute("04_flash_attention", tmp_path)
    assert facts["fused_vs_unfused"] <= 1e-2
    assert facts["kernels_fused"] < facts["kernels_unfused"]
    runs = facts["runs"]
    for m in ("tiny", "ascend910b"):
        fused, unfused = runs[f"{m}/fused"], runs[f"{m}/fuse=False"]
        assert fused[1] < 0.5 * unfused[1], f"{m}: fusion should cut HBM traffic"
        assert fused[0] < unfused[0], f"{m}: fusion should save time"
    assert "all outputs match JAX" in _text(_outputs(nb, "q, k, v = (rng.standard_normal((1, 2"))
    assert "image/png" in _mimes(_outputs(nb, 'pto.viz.timeline(profiles["tiny", "fused"])'))


@pytest.mark.notebooks
def test_05_custom_machine(jupyter_path: Path, tmp_path: Path) -> None:
    nb, facts = _execute("05_custom_machine", tmp_path)
    base, fast, small = "ascend910b", "910b-hbm3e", "8-cluster-slow"
    # twice the HBM bandwidth halves the memory-bound roof and speeds the softmax up
    assert facts[f"{fast}/softmax"][1] < 0.6 * facts[f"{base}/softmax"][1]
    assert facts[f"{fast}/softmax"][0] < facts[f"{base}/softmax"][0]
    # fewer, slower clusters raise the compute-bound roof and slow the matmul down
    assert facts[f"{small}/matmul"][1] > 2 * facts[f"{base}/matmul"][1]
    assert facts[f"{small}/matmul"][0] > facts[f"{base}/matmul"][0]
    assert facts[f"{base}/matmul"][2] == "cube" and facts[f"{base}/softmax"][2] == "hbm"
    assert "image/png" in _mimes(_outputs(nb, "pto.viz.roofline(*runs"))
    assert "half-ub: TileError" in _text(_outputs(nb, "half_ub = "))


def test_docs_page_shows_existing_screenshots() -> None:
    docs = NOTEBOOKS.parent / "docs"
    page = (docs / "notebooks.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\((img/[^)]+\.png)\)", page)
    assert len(images) >= 10
    for rel in images:
        data = (docs / rel).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n"), rel
    for name in NAMES:
        assert f"## {name[:2]} ·" in page, f"docs/notebooks.md says nothing about {name}"
    assert "(notebooks.md)" in (docs / "index.md").read_text()


@pytest.mark.notebooks
def test_06_writing_kernels(jupyter_path: Path, tmp_path: Path) -> None:
    nb, facts = _execute("06_writing_kernels", tmp_path)
    assert facts["interp_vs_npu"] == 0.0, "the kernel's interpret mode and the NPU disagree"
    assert facts["softmax_err"] <= 1e-3 and facts["hand_vs_compiled"] <= 2e-3
    assert facts["kernels"] == ["softmax_rows", "mul"]
    assert facts["hand_cycles"] > 0 and facts["compiled_cycles"] > 0
    assert facts["block_err"] <= 1e-3
    printed = _text(_outputs(nb, "@pto.kernel(grid=(2,), out=pto.ShapeDtype((2, 4)"))
    assert "grid point 1 loaded Tile(UB f32[1,4])" in printed and "[[4. 5. 6. 7.]]" in printed
    oob = _text(_outputs(nb, "@pto.kernel(grid=(2,), out=lambda x: x)"))
    assert "reaches outside it (grid point (1,) of (2,))" in oob
    tile_ir = _text(_outputs(nb, "f = pto.jit(lambda x: softmax"))
    assert "kernel @softmax_rows grid(pid0=32)" in tile_ir
    assert "all outputs match JAX" in _text(_outputs(nb, "report = pto.check("))
    assert "image/png" in _mimes(_outputs(nb, "pto.viz.timeline(prof)"))
    assert "image/png" in _mimes(_outputs(nb, "bprof = prog.profile"))
    refused = _text(_outputs(nb, "try:\n    pto.grad(lambda x: softmax_rows"))
    assert "cannot differentiate through the hand-written kernel" in refused
    assert facts["grad_err"] <= 1e-5, "jit(grad) through the kernel differs from jax.grad"
    hinted = _text(_outputs(nb, "def block(x, w):"))
    assert "grid(r=32) cores(4) vec_tile(rows=8, cols=256)  on 4 vector cores" in hinted
