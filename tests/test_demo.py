"""The command line's demo and run: they compile, run on the simulated NPU, match JAX and write
a self-contained report (every section, valid inline images) and a Chrome trace; the report
opens in a real headless Chromium without console errors."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pypto.__main__ import main
from pypto.report import SECTIONS

IMG = re.compile(r"<img alt='[^']*' src='data:(image/[a-z+]+);base64,([A-Za-z0-9+/=]+)'>")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo")
    buf = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(buf):
        rc = main(["demo", "--seq", "64", "--hidden", "128", "--heads", "2", "--out", str(out)])
    assert rc == 0, buf.getvalue()
    return out, buf.getvalue()


def _images(page: str) -> list[tuple[str, bytes]]:
    return [(mime, base64.b64decode(data)) for mime, data in IMG.findall(page)]


def check_trace(path: Path) -> dict[str, Any]:
    """Chrome trace-event JSON: the events a viewer needs, with their required fields."""
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    assert isinstance(events, list) and events
    phases = {e["ph"] for e in events}
    assert {"M", "X"} <= phases
    for e in events:
        assert isinstance(e["pid"], int)
        if e["ph"] == "X":
            assert e["name"] and isinstance(e["tid"], int)
            assert e["ts"] >= 0 and e["dur"] >= 0
        if e["ph"] in ("s", "f"):
            assert "id" in e and e["ts"] >= 0
    # every flow that starts also finishes
    starts = {e["id"] for e in events if e["ph"] == "s"}
    assert starts == {e["id"] for e in events if e["ph"] == "f"}
    return doc


def test_demo_prints_the_summary_and_matches_jax(demo_dir: tuple[Path, str]) -> None:
    _, text = demo_dir
    assert "decoder block on ascend910b" in text
    for column in ("ops", "kernels", "compile s", "cycles", "µs", "efficiency", "bound", "HBM MB"):
        assert column in text
    row = next(ln for ln in text.splitlines() if ln.startswith("decoder_block "))
    assert row.split()[-1] == "ok"
    assert "all outputs match JAX" in text
    for level in ("Tensor IR", "Tile IR", "Block IR", "PTO ISA", "simulate"):
        assert level in text


def test_demo_report_has_every_section_and_valid_images(demo_dir: tuple[Path, str]) -> None:
    out, _ = demo_dir
    page = (out / "report.html").read_text()
    for sid, title in SECTIONS:
        assert f"<section id='{sid}'><h2>{title}</h2>" in page
    # self-contained: nothing loaded from elsewhere, no scripts
    assert "<script" not in page
    assert not re.search(r"(src|href)=['\"](https?:|//)", page)
    assert "could not be drawn" not in page
    images = _images(page)
    assert page.count("<img") == len(images)
    kinds = [m for m, _ in images]
    assert kinds.count("image/png") == 4  # timeline, memory, tiles, roofline
    if shutil.which("dot"):
        assert kinds.count("image/svg+xml") == 3  # Tensor, Tile and Block IR graphs
    for mime, data in images:
        if mime == "image/png":
            assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
        else:
            root = ET.fromstring(data)
            assert root.tag.endswith("svg")
    # the IR listings of every level
    for marker in ("func @decoder_block", "tile_func @decoder_block", "block_func @decoder_block"):
        assert marker in page
    assert ".program decoder_block" in page or "pto-pipe-" in page


def test_demo_trace_is_chrome_trace_json(demo_dir: tuple[Path, str]) -> None:
    out, _ = demo_dir
    doc = check_trace(out / "trace.json")
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert {"aic0", "aiv0"} <= names


SCRIPT = """
import sys
import numpy as np
import pypto as pto

@pto.jit
def scaled_softmax(x, s):
    return pto.softmax(x * s)

mlp = pto.jit(lambda x, w: pto.gelu(x @ w))

x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float16)
w = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float16)
for _ in range(2):
    y = scaled_softmax(x, 0.5)
z = mlp(x, w)
print("script ran with", sys.argv[1:], y.shape, z.shape)
"""


def test_run_reports_every_jit_function(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    script = tmp_path / "user.py"
    script.write_text(SCRIPT)
    out = tmp_path / "report"
    rc = main(["run", str(script), "--machine", "tiny", "--report", str(out), "--", "--flag"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "script ran with ['--flag'] (64, 128) (64, 64)" in text
    assert (out / "index.html").exists()
    for name in ("scaled_softmax", "lambda"):
        page = (out / name / "report.html").read_text()
        for sid, _ in SECTIONS:
            assert f"<section id='{sid}'>" in page
        assert "tiny" in page and "all outputs match JAX" in page
        check_trace(out / name / "trace.json")
        assert f"href='{name}/report.html'" in (out / "index.html").read_text()
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["lambda", "scaled_softmax"]


def test_run_without_jit_calls_says_so(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    script = tmp_path / "plain.py"
    script.write_text("print('no jit here')\n")
    assert main(["run", str(script), "--report", str(tmp_path / "r")]) == 1
    assert "called no pto.jit function" in capsys.readouterr().err


# ---- a real browser -------------------------------------------------------------------------


def _chromium() -> str:
    """Debian's chromium, installed with apt-get when root and missing; otherwise skip."""
    path = shutil.which("chromium")
    if path is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, timeout=600)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"], check=False, env=env, timeout=1200
        )
        path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's chromium is not installed and cannot be without root (make browser)")
    return path


def test_demo_report_opens_in_chromium_without_console_errors(
    demo_dir: tuple[Path, str], tmp_path: Path
) -> None:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="python playwright is not installed (pip install -e .[dev])"
    )
    exe = _chromium()
    out, _ = demo_dir
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on(
                "console",
                lambda m: (
                    errors.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url[:80]}"))
            page.goto((out / "report.html").resolve().as_uri(), wait_until="load")
            loaded = page.evaluate(
                "Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)"
            )
            titles = page.evaluate(
                "Array.from(document.querySelectorAll('h2')).map(h => h.textContent)"
            )
            page.screenshot(path=str(tmp_path / "report.png"))
        finally:
            browser.close()
    assert errors == []
    assert loaded and all(loaded), loaded
    assert titles == [t for _, t in SECTIONS]
