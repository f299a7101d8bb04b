"""The ``%%pypto`` cell magic: stage a cell's tensor code as one graph, compile, run, report.

The cell's inputs are the tensors and arrays it reads from the namespace before assigning them;
its outputs are the names it assigns at top level. They are bound back into the namespace.

    %load_ext pypto
    %%pypto --show graph,tile --check
    h = pto.gelu(x @ w)
    y = pto.softmax(h)
"""

from __future__ import annotations

import argparse
import ast
import itertools
import linecache
import shlex
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto.core.errors import PyptoError
from pypto.ops.table import Value

SHOW = ("graph", "tensor", "tile", "block", "isa", "timeline", "memory", "roofline")
_counter = itertools.count()


class MagicError(PyptoError):
    """A bad ``%%pypto`` line or a cell that cannot be staged."""


def parse_line(line: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="%%pypto", add_help=False)
    p.add_argument("--machine", default="ascend910b")
    p.add_argument("--show", default="")
    p.add_argument("--check", action="store_true")
    p.add_argument("--interpret", action="store_true")
    try:
        args = p.parse_args(shlex.split(line))
    except SystemExit:
        raise MagicError(
            f"cannot read the options {line!r}",
            op="%%pypto",
            hint="%%pypto [--machine NAME] [--show graph,tensor,...] [--check] [--interpret]",
        ) from None
    shows = [s for s in args.show.split(",") if s]
    bad = [s for s in shows if s not in SHOW]
    if bad:
        raise MagicError(f"unknown --show {bad}", op="%%pypto", hint=f"choose from {SHOW}")
    args.show = shows
    return args


def _is_array(v: Any) -> bool:
    return isinstance(v, Value | np.ndarray)


def cell_signature(source: str, ns: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(inputs, outputs): names read before being assigned that hold arrays; names assigned."""
    tree = ast.parse(source)
    assigned: set[str] = set()
    inputs: list[str] = []
    outputs: list[str] = []
    for stmt in tree.body:
        loads = [
            n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        ]
        for name in loads:
            if name not in assigned and name not in inputs and _is_array(ns.get(name)):
                inputs.append(name)
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, ast.AugAssign | ast.AnnAssign):
            targets = [stmt.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    assigned.add(n.id)
                    if n.id not in outputs:
                        outputs.append(n.id)
    return inputs, outputs


@dataclass
class CellReport:
    """What a ``%%pypto`` cell did: its levels, outputs, the NPU profile and (with --check) the
    JAX comparison."""

    name: str
    inputs: list[str]
    outputs: list[str]
    lowered: Any
    backend: str
    check: Any = None
    shows: list[str] = field(default_factory=list)
    profile: Any = None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        import html

        text = [
            f"%%pypto {self.name}: inputs {self.inputs} → outputs {self.outputs} "
            f"on backend {self.backend!r}, {len(self.lowered.tensor_ir.eqns)} ops in "
            f"{len(self.lowered.tensor_ir.groups)} kernels"
        ]
        parts = [f"<b>{html.escape(text[0])}</b>"]
        p = self.profile
        if p is not None:
            line = (
                f"{p.machine.name}: {p.cycles:,.0f} cycles ({p.seconds * 1e6:,.1f} µs), "
                f"efficiency {p.efficiency:.1%} of the roofline ({p.bound}-bound)"
            )
            text.append(line)
            parts.append(f"<div>{html.escape(line)}</div>")
        for s in self.shows:
            if s == "graph":
                from pypto.viz import graph

                b = graph(self.lowered)._repr_mimebundle_()
                parts.append(b.get("image/svg+xml") or b["text/html"])
                continue
            if s in ("tensor", "tile", "block", "isa"):
                if s != "tensor" and self.backend != "npu":
                    msg = f"--show {s}: the cell ran on the interpreter (drop --interpret)"
                    text.append(msg)
                    parts.append(f"<div><i>{html.escape(msg)}</i></div>")
                    continue
                attr = {"tensor": "tensor_ir", "tile": "tile_ir", "block": "block_ir"}
                ir = getattr(self.lowered, attr.get(s, s))
                text.append(str(ir))
                parts.append(f"<pre class='pypto-ir'>{html.escape(str(ir))}</pre>")
                continue
            msg = f"--show {s}: the {s} view is not built yet"
            text.append(msg)
            parts.append(f"<div><i>{html.escape(msg)}</i></div>")
        if self.check is not None:
            text.append(str(self.check))
            parts.append(self.check._repr_html_())
        return {"text/plain": "\n".join(text), "text/html": "".join(parts)}


def run_cell(line: str, cell: str, ns: dict[str, Any]) -> CellReport:
    """Stage ``cell`` with namespace ``ns``, run it and bind its outputs into ``ns``."""
    from pypto.compiler import jit
    from pypto.reference import check

    args = parse_line(line)
    inputs, outputs = cell_signature(cell, ns)
    if not outputs:
        raise MagicError(
            "the cell assigns no names, so it has no outputs",
            op="%%pypto",
            hint="assign the results, e.g. `y = pto.softmax(x)`",
        )
    name = f"cell{next(_counter)}"
    filename = f"<pypto-{name}>"
    fn = _cell_function(name, cell, inputs, outputs, filename, ns)
    backend = "interpret" if args.interpret else "npu"
    jitted = jit(fn, machine=args.machine, backend=backend)
    values = [ns[i] for i in inputs]
    lowered = jitted.lower(*values)
    prof = None
    if backend == "npu" and lowered.tile_ir.kernels:
        prof = jitted.profile(*values)
        from pypto.graph import pytree

        out = pytree.unflatten(lowered.out_tree, prof.outputs)
    else:
        out = jitted(*values)
    ns.update(out)
    report = CellReport(name, inputs, outputs, lowered, backend, shows=args.show, profile=prof)
    if args.check:
        report.check = check(fn, *values, verbose=False, machine=args.machine)
    return report


def _cell_function(
    name: str, cell: str, inputs: list[str], outputs: list[str], filename: str, ns: dict[str, Any]
) -> Any:
    """``def name(*inputs): <cell>; return {outputs}``, keeping the cell's own line numbers."""
    body = ast.parse(cell).body
    ret = ast.parse(f"return {{{', '.join(f'{o!r}: {o}' for o in outputs)}}}").body[0]
    last = body[-1].end_lineno or 1
    ast.increment_lineno(ret, last)
    fdef = ast.FunctionDef(
        name=name,
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=i) for i in inputs],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        ),
        body=[*body, ret],
        decorator_list=[],
        returns=None,
    )
    ast.copy_location(fdef, body[0])
    mod = ast.fix_missing_locations(ast.Module(body=[fdef], type_ignores=[]))
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    scope: dict[str, Any] = {}
    exec(compile(mod, filename, "exec"), ns, scope)
    return scope[name]


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%pypto`` (called by ``%load_ext pypto``)."""

    def pypto_magic(line: str, cell: str) -> Any:
        return run_cell(line, cell, ipython.user_ns)

    ipython.register_magic_function(pypto_magic, "cell", "pypto")
