"""Jupyter integration: ``%load_ext pypto`` and the ``%%pypto`` cell magic."""

from pypto.jupyter.magic import CellReport, load_ipython_extension, run_cell

__all__ = ["CellReport", "load_ipython_extension", "run_cell"]
