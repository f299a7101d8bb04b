"""docs/lowering.md shows the real text of every level for its example; it must stay current."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import pypto as pto

DOC = Path(__file__).resolve().parents[2] / "docs" / "lowering.md"


def rms_norm_residual(x: pto.Tensor, w: pto.Tensor, r: pto.Tensor) -> pto.Tensor:
    return pto.rms_norm(x + r, w)


def test_the_doc_shows_what_the_compiler_prints() -> None:
    blocks = re.findall(r"```text\n(.*?)```", DOC.read_text(), flags=re.S)
    x = pto.ones((64, 128), pto.float16)
    w = pto.ones((128,), pto.float16)
    low = pto.jit(rms_norm_residual, machine="tiny", tile=dict(vec=(16, 128))).lower(x, w, x)
    tile = re.sub(r"\s+#.*", "", str(low.tile_ir))
    isa = re.sub(r'  loc\("[^"]*"\)', "", str(low.isa)).rstrip("\n")
    block = re.sub(r'  loc\("[^"]*"\)', "", str(low.block_ir))
    shown = [b.rstrip("\n") for b in blocks]
    assert tile in shown, "the Tile IR in docs/lowering.md is out of date"
    assert isa in shown, "the ISA in docs/lowering.md is out of date"
    doc_block = next(b for b in shown if b.startswith("block_func"))
    assert re.sub(r'  loc\("[^"]*"\)', "", doc_block) == block, "the Block IR is out of date"


def test_the_read_ahead_shown_is_what_the_compiler_prints() -> None:
    (shown,) = [
        b for b in re.findall(r"```text\n(.*?)```", DOC.read_text(), flags=re.S) if "%pfb" in b
    ]
    x = np.zeros((2048, 4096), np.float16)
    w = np.zeros((4096, 4096), np.float16)
    (k,) = pto.jit(lambda x, w: x @ w, machine="ascend910b").lower(x, w).tile_ir.kernels
    text = str(k)
    aiv = text[text.index("  .aiv\n") :].rsplit("\n}", 1)[0]
    assert shown.rstrip("\n") == aiv.rstrip("\n"), "the read-ahead in docs/lowering.md is stale"


def test_the_take_kernel_shown_is_what_the_compiler_prints() -> None:
    (shown,) = [
        b for b in re.findall(r"```text\n(.*?)```", DOC.read_text(), flags=re.S) if "SLD %ix" in b
    ]
    x = np.zeros((3000, 64), np.float16)
    i = np.zeros(32, np.int32)
    isa = str(pto.jit(lambda x, i: pto.take(x, i, axis=0), machine="tiny").lower(x, i).isa)
    isa = re.sub(r'  loc\("[^"]*"\)', "", isa)
    assert shown in isa, "the take kernel in docs/lowering.md is stale"


def test_the_sort_kernel_shown_is_what_the_compiler_prints() -> None:
    (shown,) = [
        b for b in re.findall(r"```text\n(.*?)```", DOC.read_text(), flags=re.S) if "tsort32" in b
    ]
    x = np.zeros((4, 40), np.float32)
    (k,) = pto.jit(lambda x: pto.argsort(x), machine="tiny").lower(x).tile_ir.kernels
    assert shown.rstrip("\n") == re.sub(r"\s+#.*", "", str(k)), "the sort kernel is stale"
