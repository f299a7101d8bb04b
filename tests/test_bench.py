"""Smoke tests of the benchmark runner (``make bench``): structure only, never timing targets.

The numbers themselves belong in docs/performance.md; here the runner runs in quick mode and the
tests check the shape of its markdown table and of its JSON.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `bench` lives at the top of the repository, beside `pypto`
    sys.path.insert(0, str(ROOT))

import bench  # noqa: E402
from bench import Column, Group, Settings  # noqa: E402
from bench import __main__ as runner  # noqa: E402
from bench.eager_overhead import shape_text  # noqa: E402
from bench.lowering import error_line, profile_row, run_limited  # noqa: E402
from bench.timing import Candidate, interleaved  # noqa: E402

EAGER_HEADERS = [
    "benchmark",
    "shape",
    "pypto",
    "numpy",
    "jax",
    "pypto/numpy",
    "pypto/jax",
    "target",
    "met",
]


def _tiny_run(settings: Settings) -> Iterator[dict[str, Any]]:
    stats = interleaved(
        {"a": Candidate("f(x)", {"f": abs, "x": -1}), "b": Candidate("pass", {})},
        settings.repeats,
        settings.batch_seconds,
    )
    yield {"name": "abs", "a_s": stats["a"].median, "b_s": stats["b"].median, "met": None}


TINY = Group(
    name="tiny",
    title="a tiny group for the smoke test",
    columns=(Column("name", "name"), Column("a", "a_s", lambda v: f"{v:.3g}", "right")),
    run=_tiny_run,
    notes=("a note",),
)


def _table(text: str, title: str) -> list[list[str]]:
    """The cells of the markdown table under the heading that contains ``title``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## ") and title in line)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_tiny_group_through_the_runner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    machine = {"date": "today"}
    report = runner.run([TINY], Settings.for_mode(quick=True), tmp_path, machine)
    table = _table(capsys.readouterr().out, "tiny")
    assert table[0] == ["name", "a"]
    assert table[1] == ["---", "---:"]
    assert table[2][0] == "abs" and len(table) == 3
    saved = json.loads((tmp_path / "tiny.json").read_text())
    assert saved["group"] == "tiny" and saved["machine"] == machine
    assert saved["rows"] == report["groups"]["tiny"]["rows"]
    assert saved["settings"]["quick"] is True
    latest = json.loads((tmp_path / "latest.json").read_text())
    assert list(latest["groups"]) == ["tiny"]


def test_registry() -> None:
    registry = bench.groups()
    assert set(registry) >= {"eager_overhead", "graph_compile", "npu_sim", "lowering"}
    assert "bench.lowering" in bench.GROUP_MODULES and "bench.kernels" in bench.GROUP_MODULES
    group = registry["eager_overhead"]
    assert [c.header for c in group.columns] == EAGER_HEADERS
    with pytest.raises(ValueError, match="twice"):
        bench.register(Group(group.name, "other", group.columns, group.run))


def test_eager_overhead_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.main(["--only", "eager_overhead", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = _table(out, "eager_overhead")
    assert table[0] == EAGER_HEADERS
    body = table[2:]
    ops = ["add", "mul", "exp", "matmul", "sum"]
    shapes = [shape_text((8, 8)), shape_text((1024, 1024))]
    assert [(r[0], r[1]) for r in body] == [(o, s) for s in shapes for o in ops]
    assert all(len(r) == len(EAGER_HEADERS) and r[-1] in ("yes", "**no**") for r in body)

    saved = json.loads((tmp_path / "eager_overhead.json").read_text())
    rows = saved["rows"]
    assert len(rows) == 10
    for row in rows:
        for key in ("pypto_s", "numpy_s", "jax_s", "pypto_over_numpy", "pypto_over_jax"):
            assert isinstance(row[key], float) and row[key] > 0
        assert isinstance(row["met"], bool)
        assert row["target"].startswith("≤")
        assert set(row["stats"]) == {"pypto", "numpy", "jax"}
    machine = json.loads((tmp_path / "latest.json").read_text())["machine"]
    for key in ("cpu_count", "numpy", "jax", "date", "openblas_env_set", "env"):
        assert key in machine
    assert set(machine["openblas_env_set"]) >= {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"}


def test_unknown_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.main(["--only", "no_such_group", "--no-write"]) == 2
    assert "no_such_group" in capsys.readouterr().err


LOWERING_HEADERS = [
    "benchmark",
    "shape",
    "result",
    "target",
    "met",
    "simulated",
    "roofline",
    "bound",
    "pipes busy",
    "compile",
    "sim wall",
]
LOWERING_ROWS = [
    "fp16 GEMM",
    "fp16 GEMM, awkward",
    "elementwise gelu(x·1.5+0.5)·x",
    "softmax (last axis)",
    "layer_norm",
    "rms_norm",
    "flip (last axis)",
    "cumsum (last axis)",
    "argsort (last axis)",
    "random.uniform (Threefry-2x32)",
    "elementwise chain, value_and_grad",
    "elementwise chain, value_and_grad, checkpointed",
    "checkpoint speed-up (kept / recomputed cycles)",
    "top_k (last axis)",
    "causal attention",
    "causal attention, jax.nn layout, grouped heads",
    "causal attention with a bias, jax.nn layout",
    "attention, decoding",
    "3x3 convolution, NHWC, SAME",
    "3x3 convolution, gradients (input and kernel)",
    "3x3/2 max pooling, NHWC, SAME",
    "decoder block forward",
    "decoder block forward, fuse=False",
    "fusion speed-up (fuse=False / fused cycles)",
    "decoder block gradient (all weights)",
    "decoder block: compile, all four levels",
    "decoder block: compile, all four levels",
    "decoder block: compile time ratio",
    "decoder block: ISA static size (instructions)",
    "long program: compile, all four levels",
]


def test_lowering_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every row prints, whether its lowering exists yet or not (then: its error, not met)."""
    assert runner.main(["--only", "lowering", "--quick", "--out", str(tmp_path)]) == 0
    table = _table(capsys.readouterr().out, "lowering")
    assert table[0] == LOWERING_HEADERS
    body = table[2:]
    assert [r[0] for r in body] == LOWERING_ROWS
    assert all(len(r) == len(LOWERING_HEADERS) and r[4] in ("yes", "no", "") for r in body)
    rows = json.loads((tmp_path / "lowering.json").read_text())["rows"]
    assert len(rows) == len(LOWERING_ROWS)
    # every row lowers and runs on the quick shapes too (an error row would hide a regression)
    assert [r["benchmark"] for r in rows if "error" in r] == []
    for row in rows:
        if "error" in row:
            assert row["met"] is not True and "\n" not in row["error"]
            assert row["result"] == row["error"]
        elif row["kind"] in ("efficiency", "baseline"):
            assert 0 < row["efficiency"] <= 1 + 1e-9
            assert row["cycles"] >= row["roofline_cycles"] > 0
            assert row["sim_wall_s"] > 0 and row["compile_s"] > 0
            assert "MTE2" in row["utilization"]
    judged = [r for r in rows if r["met"] is not None]
    # flip, cumsum, argsort, random.uniform, the chain's two gradients, top_k, grouped, biased
    # and decoding attention, the convolution, its gradients and the pooling, the fuse=False
    # baseline and the block's gradient have no target of their own
    assert len(judged) == len(rows) - 15
    softmax = next(r for r in rows if r["benchmark"] == "softmax (last axis)")
    assert softmax.get("error") is None and isinstance(softmax["met"], bool)


def test_kernels_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each hand-written kernel is measured beside its compiled counterpart."""
    assert runner.main(["--only", "kernels", "--quick", "--out", str(tmp_path)]) == 0
    table = _table(capsys.readouterr().out, "kernels")
    assert [r[0] for r in table[2:]] == [
        "flash attention: hand-written kernel",
        "flash attention: compiled",
        "rms_norm + matmul: hand-written kernel",
        "rms_norm + matmul: compiled",
    ]
    rows = json.loads((tmp_path / "kernels.json").read_text())["rows"]
    for hand, comp in zip(rows[::2], rows[1::2], strict=True):
        assert "error" not in hand and "error" not in comp
        assert 0 < hand["efficiency"] <= 1 + 1e-9 and 0 < comp["efficiency"] <= 1 + 1e-9
        assert hand["vs_compiled"] == pytest.approx(comp["cycles"] / hand["cycles"])


def test_lowering_row_reports_errors() -> None:
    def broken(x: Any) -> Any:
        raise NotImplementedError("not lowered yet\nsecond line")

    row = profile_row("broken", "2", broken, (np.zeros(2, np.float16),), 0.5)
    assert row["met"] is False
    assert row["error"] == "NotImplementedError: not lowered yet" == row["result"]
    assert error_line(ValueError()) == "ValueError"


def test_lowering_time_limit() -> None:
    """A row over its time limit is killed and reported, and the table goes on."""
    assert run_limited(lambda: {"x": 1}, 30.0) == ("ok", {"x": 1})
    status, text = run_limited(lambda: 1 // 0, 30.0)  # type: ignore[arg-type, return-value]
    assert (status, text) == ("error", "ZeroDivisionError: integer division or modulo by zero")
    status, text = run_limited(lambda: time.sleep(60) or {}, 0.5)
    assert status == "error" and text.startswith("timed out")
