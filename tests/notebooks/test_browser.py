"""The quickstart notebook in a real browser: JupyterLab on 127.0.0.1 (a free port, a token, no
browser of its own) serves a temporary copy of notebooks/ with the outputs cleared; Python
playwright drives Debian's chromium (through ``executable_path``; no browser is downloaded) to
open the notebook, run all cells and wait for them. The timeline image, the graph, the magic's
report and the Explorer's tabs must render, with no error output; selecting the Explorer's
Timeline tab draws it through the live kernel. Screenshots go to build/test-artifacts/."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .conftest import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "build" / "test-artifacts"
TABS = ["Tensor", "Tile", "Block", "ISA", "Timeline", "Memory", "Tiles", "Roofline", "Numerics"]

pytestmark = pytest.mark.browser


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _settings(root: Path) -> Path:
    """User settings: every cell kept in the page (no windowing), no news or update pop-ups."""
    settings = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
    }
    for rel, doc in settings.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
    return root


@pytest.fixture
def lab(jupyter_path: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server over a copy of notebooks/ (quickstart's outputs cleared): its URL
    base with the token, and its log file. Shut down at the end, whatever happened."""
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed (pip install -e .[dev])")
    work = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, work)
    nb_path = work / "01_quickstart.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, nb_path)

    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(_settings(tmp_path / "settings")),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
    }
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={work}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--ServerApp.terminals_enabled=False",
        *(["--allow-root"] if os.geteuid() == 0 else []),
    ]
    log = tmp_path / "jupyterlab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=work)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer in 120 s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"{base}/lab/tree/01_quickstart.ipynb?token={token}", log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _accept_kernel_dialog(page: Any) -> None:
    """JupyterLab may ask which kernel to start (its "Select Kernel" dialog): take the one it
    proposes, the notebook's own ``python3``."""
    dialog = page.locator(".jp-Dialog .jp-mod-accept")
    try:
        dialog.first.wait_for(state="visible", timeout=15_000)
    except Exception:
        return  # no dialog: the kernel started by itself
    dialog.first.click()
    dialog.first.wait_for(state="hidden", timeout=15_000)


def _run_all(page: Any) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


DONE = """() => {
  const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
  return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
}"""


def test_quickstart_runs_in_jupyterlab(lab: tuple[str, Path]) -> None:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="python playwright is not installed (pip install -e .[dev])"
    )
    exe = _chromium()
    url, log = lab
    page_errors: list[str] = []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            page.goto(url, wait_until="domcontentloaded", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=120_000)
            _accept_kernel_dialog(page)
            page.wait_for_selector(
                ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000
            )
            n_code = page.locator(".jp-Notebook .jp-CodeCell").count()
            _run_all(page)
            try:
                page.wait_for_function(DONE, timeout=300_000, polling=1000)
            except Exception:
                page.screenshot(path=str(ARTIFACTS / "quickstart-timeout.png"))
                raise AssertionError(
                    f"the cells did not finish in 300 s; server log:\n{log.read_text()[-3000:]}"
                ) from None
            outputs = page.locator(".jp-Notebook .jp-OutputArea-output")
            errors = page.locator(
                ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
            )
            assert errors.count() == 0, errors.all_inner_texts()
            assert outputs.count() >= n_code // 2

            # the timeline (and any other figure) as a loaded PNG
            images = page.locator(".jp-RenderedImage img")
            assert images.count() >= 1
            sizes = images.evaluate_all("els => els.map(i => [i.complete, i.naturalWidth])")
            assert all(ok and w > 300 for ok, w in sizes), sizes
            # the Tensor IR graph: Graphviz's SVG with a node per op, or the text fallback
            if shutil.which("dot"):
                nodes = page.locator(
                    ".jp-RenderedSVG svg g.node, .jp-RenderedHTMLCommon svg g.node"
                )
                assert nodes.count() >= 10
            # the magic's report
            report = page.locator(".jp-OutputArea-output", has_text="%%pypto cell")
            assert report.count() >= 1
            text = report.first.inner_text()
            assert "inputs ['x', 'w'] → outputs ['h2', 'out']" in text
            rows = [r for r in text.splitlines() if r.startswith(("eager", "interpret", "npu"))]
            assert len(rows) == 6 and all(r.rstrip().endswith("ok") for r in rows), rows

            # the Explorer: every tab, and the Timeline tab drawn through the live kernel
            tabs = page.locator(".widget-tab .lm-TabBar-tab")
            tabs.first.wait_for(timeout=60_000)
            titles = [t.strip() for t in tabs.all_inner_texts()]
            assert titles == TABS, titles
            page.locator(".widget-tab").first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "quickstart-explorer-tensor.png"))
            tabs.nth(TABS.index("Timeline")).click()
            timeline = page.locator(".widget-tab .widget-image")
            timeline.first.wait_for(timeout=120_000)
            page.wait_for_function(
                "() => [...document.querySelectorAll('.widget-tab .widget-image')]"
                ".some(i => i.complete && i.naturalWidth > 300)",
                timeout=60_000,
            )
            page.locator(".widget-tab").first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "quickstart-explorer-timeline.png"))
            images.first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "quickstart.png"))
        finally:
            browser.close()
    assert not page_errors, page_errors
    assert (ARTIFACTS / "quickstart.png").stat().st_size > 10_000
