"""The views are exported from pto.viz, which loads (with matplotlib and graphviz) on first use."""

from __future__ import annotations

import subprocess
import sys

import pypto as pto


def test_every_view_is_exported() -> None:
    views = ("graph", "isa", "timeline", "memory", "tiles", "roofline")
    for name in (*views, "steps", "passes", "explore", "tune", "tune_once"):
        assert callable(getattr(pto.viz, name)) and name in pto.viz.__all__


def test_importing_pypto_loads_no_plotting_library() -> None:
    code = "import sys, pypto; print('matplotlib' in sys.modules, 'graphviz' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
