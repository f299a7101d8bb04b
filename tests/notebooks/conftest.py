"""Set-up for the notebook tests: the ``notebooks`` and ``browser`` markers, and a Jupyter kernel
spec named ``python3`` that runs this interpreter (so notebooks execute in the project's venv,
whatever other kernel specs the machine has)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "notebooks: executes the notebooks in notebooks/ with a real kernel (slow)"
    )
    config.addinivalue_line(
        "markers", "browser: drives JupyterLab in Debian's chromium through playwright (slow)"
    )


def write_kernel_spec(root: Path) -> Path:
    """A ``kernels/python3`` spec under ``root`` that starts ``sys.executable``; put ``root`` first
    on JUPYTER_PATH to make it the one Jupyter finds."""
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    doc = {"argv": argv, "display_name": "Python 3 (pypto)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(doc))
    return root


@pytest.fixture(scope="session")
def jupyter_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """JUPYTER_PATH with this interpreter's kernel spec first; progress bars off in kernels."""
    root = write_kernel_spec(tmp_path_factory.mktemp("jupyter"))
    with pytest.MonkeyPatch.context() as mp:
        rest = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
        mp.setenv("JUPYTER_PATH", os.pathsep.join([str(root), *rest]))
        mp.setenv("PYPTO_PROGRESS", "0")
        yield root
