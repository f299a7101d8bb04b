"""Reports of compiled functions: a summary table for the terminal and one self-contained HTML
page per function (graphs, the IR of every level, timeline, memory, tiles, roofline, the check
against JAX), with the Chrome trace beside it.

:func:`analyze` compiles a function for its arguments, timing each level, runs it on the
simulated NPU with the trace on and compares its outputs with JAX; :func:`write` turns the
result into ``report.html`` and ``trace.json``. The page needs nothing from outside: images
are inline data URIs, the styles are in the page and it has no scripts.

>>> import numpy as np, pypto as pto
>>> r = analyze(pto.jit(lambda x: pto.softmax(x), machine="tiny"), np.ones((32, 256), np.float32))
>>> r.check.ok, r.kernels[0].name
(True, 'softmax')
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import html
import itertools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pypto.block.ir import BItem, BLoop
from pypto.compiler import Jitted, Lowered, jit, simulate_lowered
from pypto.core import progress
from pypto.eager.tensor import Tensor
from pypto.graph import pytree
from pypto.npu.profile import Profile
from pypto.reference.compare import Comparison, compare
from pypto.reference.jax_bridge import CheckReport, eval_jax, precisions, sum_lengths

__all__ = [
    "SECTIONS",
    "FunctionReport",
    "KernelStat",
    "analyze",
    "html_page",
    "kernel_table",
    "level_table",
    "record_jit_calls",
    "summary_table",
    "write",
    "write_index",
]

SECTIONS = (
    ("summary", "Summary"),
    ("check", "Check against JAX"),
    ("kernels", "Kernels"),
    ("graph-tensor", "Tensor IR graph"),
    ("graph-tile", "Tile IR graph"),
    ("graph-block", "Block IR graph"),
    ("timeline", "Timeline"),
    ("memory", "Memory"),
    ("tiles", "Tiles"),
    ("roofline", "Roofline"),
    ("ir-tensor", "Tensor IR"),
    ("ir-tile", "Tile IR"),
    ("ir-block", "Block IR"),
    ("ir-isa", "PTO ISA"),
)
"""The report's sections: (HTML id, title), in page order."""

LEVELS = ("trace", "tensor passes", "tile", "block", "isa")
"""The compile stages timed, in the order the driver runs them."""


@dataclass(frozen=True)
class KernelStat:
    """One kernel as it ran: the cycles from its first instruction's start to its last one's
    end on any core (kernels without a barrier between them may overlap)."""

    name: str
    kind: str
    dist: str
    points: int
    flops: int
    start: float
    end: float
    instructions: int

    @property
    def cycles(self) -> float:
        return self.end - self.start


@dataclass
class FunctionReport:
    """What :func:`analyze` found out about one function for one set of arguments."""

    name: str
    lowered: Lowered
    profile: Profile
    check: CheckReport
    compile_seconds: dict[str, float]
    simulate_seconds: float
    kernels: list[KernelStat] = field(default_factory=list)

    @property
    def max_error(self) -> float:
        """The largest absolute difference from JAX over every output of the NPU run."""
        return max((c.max_abs for b, c in self.check.rows if b.startswith("npu")), default=0.0)


@contextlib.contextmanager
def _timed_stages(marks: list[tuple[str, float]]) -> Iterator[None]:
    """Record when each compile stage starts, by wrapping the driver's progress stages."""
    original = progress.stages

    @contextlib.contextmanager
    def stages(desc: str, names: list[str]) -> Iterator[Callable[[str], None]]:
        with original(desc, names) as step:

            def timed(name: str) -> None:
                marks.append((name, time.perf_counter()))
                step(name)

            yield timed
        marks.append(("", time.perf_counter()))

    progress.stages = stages
    try:
        yield
    finally:
        progress.stages = original


def _durations(marks: list[tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for (name, t0), (_, t1) in itertools.pairwise(marks):
        if name:
            out[name] = out.get(name, 0.0) + t1 - t0
    return out


def _is_scalar(x: Any) -> bool:
    return type(x) in (bool, int, float)


def _dynamic_leaves(f: Jitted, args: tuple[Any, ...]) -> list[Any]:
    static = {s % len(args) for s in f.static_argnums} if args else set()
    dyn = tuple(a for i, a in enumerate(args) if i not in static)
    leaves, _ = pytree.flatten(dyn)
    return [x for x in leaves if not _is_scalar(x)]


def analyze(
    f: Callable[..., Any], *args: Any, machine: Any = None, name: str | None = None
) -> FunctionReport:
    """Compile ``f`` (a function or a ``pto.jit`` one) for ``args`` on ``machine`` (default:
    the jitted function's own, else ``ascend910b``), run it on the simulated NPU with the trace
    on, and compare its outputs, eagerly and interpreted too, with JAX."""
    base = f if isinstance(f, Jitted) else jit(f)
    m = machine if machine is not None else base.machine
    j = jit(base.fn, machine=m, tile=base.tile, static_argnums=base.static_argnums, fuse=base.fuse)
    fname: str = name or getattr(base.fn, "__name__", None) or "f"
    marks: list[tuple[str, float]] = []
    with _timed_stages(marks):
        lw = j.lower(*args)
    leaves = _dynamic_leaves(j, args)
    arrays = [x.numpy() if isinstance(x, Tensor) else np.asarray(x) for x in leaves]
    t0 = time.perf_counter()
    prof = simulate_lowered(lw, arrays, numerics=True, trace=True)
    simulate_seconds = time.perf_counter() - t0
    check = _check(fname, base, lw, args, arrays, prof, str(prof.machine.name))
    return FunctionReport(
        fname, lw, prof, check, _durations(marks), simulate_seconds, _kernels(lw, prof)
    )


def _check(
    name: str,
    f: Jitted,
    lw: Lowered,
    args: tuple[Any, ...],
    arrays: list[np.ndarray],
    prof: Profile,
    machine: str,
) -> CheckReport:
    import jax.numpy as jnp

    ref = [np.asarray(r) for r in eval_jax(lw.traced, [jnp.asarray(a) for a in arrays])]
    ks, ps = sum_lengths(lw.traced), precisions(lw.traced)
    runs: list[tuple[str, list[Any]]] = []
    interp = jit(f.fn, backend="interpret", static_argnums=f.static_argnums)
    runs.append(("eager", pytree.flatten(f.fn(*args))[0]))
    runs.append(("interpret", pytree.flatten(interp(*args))[0]))
    runs.append(("npu", list(prof.outputs or [])))
    rows: list[tuple[str, Comparison]] = []
    for backend, outs in runs:
        for i, (a, r, k, p) in enumerate(zip(outs, ref, ks, ps, strict=True)):
            rows.append((backend, compare(f"out[{i}]", np.asarray(a), r, k, precision=p)))
    return CheckReport(name, tuple(rows))


def _count(items: tuple[BItem, ...]) -> int:
    # codegen writes a loop as LOOP … ENDLOOP around its body
    return sum(2 + _count(it.body) if isinstance(it, BLoop) else 1 for it in items)


def _kernels(lw: Lowered, prof: Profile) -> list[KernelStat]:
    """Attribute each traced instruction to its kernel: a core's template is its kernels'
    programs in order with one barrier instruction between two kernels."""
    bf, tf = lw.block_ir, lw.tile_ir
    ranges: dict[str, list[int]] = {}
    for core in lw.isa.cores:
        starts, pos = [], 0
        for i, k in enumerate(bf.kernels):
            pos += 1 if i else 0
            starts.append(pos)
            prog = k.program(core.kind)
            pos += _count(prog) if prog is not None else 0
        if pos != len(core.instructions()):
            return []
        ranges[core.kind] = starts
    n = len(bf.kernels)
    lo, hi, count = np.full(n, np.inf), np.full(n, -np.inf), np.zeros(n, np.int64)
    for e in prof.events:
        starts = ranges["aic" if e.core.startswith("aic") else "aiv"]
        i = int(np.searchsorted(starts, e.instr_index, side="right")) - 1
        lo[i] = min(lo[i], e.start)
        hi[i] = max(hi[i], e.end)
        count[i] += 1
    out = []
    for i, (bk, tk) in enumerate(zip(bf.kernels, tf.kernels, strict=True)):
        ran = bool(count[i])
        out.append(
            KernelStat(
                bk.name,
                tk.kind,
                tk.dist,
                tk.points,
                tk.flops,
                float(lo[i]) if ran else 0.0,
                float(hi[i]) if ran else 0.0,
                int(count[i]),
            )
        )
    return out


# ---- text tables ------------------------------------------------------------------------


def _fmt_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)
    ]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        )

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, rows)])


SUMMARY_HEAD = (
    "function",
    "ops",
    "kernels",
    "instrs",
    "compile s",
    "cycles",
    "µs",
    "efficiency",
    "bound",
    "HBM MB",
    "max |Δ| vs JAX",
    "check",
)


def _summary_row(r: FunctionReport) -> list[str]:
    p = r.profile
    return [
        r.name,
        str(len(r.lowered.tensor_ir.eqns)),
        str(len(r.lowered.tile_ir.kernels)),
        f"{r.lowered.isa.static_size():,}",
        f"{sum(r.compile_seconds.values()):.2f}",
        f"{p.cycles:,.0f}",
        f"{p.seconds * 1e6:,.2f}",
        f"{p.efficiency:.1%}",
        p.bound,
        f"{p.hbm_bytes / 1e6:,.3f}",
        f"{r.max_error:.3g}",
        "ok" if r.check.ok else "MISMATCH",
    ]


def summary_table(reports: Sequence[FunctionReport]) -> str:
    """A row per function: its size at each level, compile time, cycles, efficiency, what
    bounds it, HBM traffic and its largest difference from JAX."""
    return _fmt_table(SUMMARY_HEAD, [_summary_row(r) for r in reports])


LEVEL_HEAD = ("level", "size", "compile s")


def _level_rows(r: FunctionReport) -> list[list[str]]:
    lw, cs = r.lowered, r.compile_seconds
    groups = {e.group for e in lw.tensor_ir.eqns if e.group is not None}
    cores = ", ".join(f"{c.kind} {len(c.instructions()):,}" for c in lw.isa.cores)
    return [
        ["Tensor IR", f"{len(lw.traced.eqns)} ops traced", f"{cs.get('trace', 0.0):.3f}"],
        [
            "  passes",
            f"{len(lw.tensor_ir.eqns)} ops, {len(groups)} fusion groups",
            f"{cs.get('tensor passes', 0.0):.3f}",
        ],
        ["Tile IR", f"{len(lw.tile_ir.kernels)} kernels", f"{cs.get('tile', 0.0):.3f}"],
        [
            "Block IR",
            f"{len(lw.block_ir.kernels)} kernels scheduled",
            f"{cs.get('block', 0.0):.3f}",
        ],
        ["PTO ISA", f"{cores} instructions", f"{cs.get('isa', 0.0):.3f}"],
        ["simulate", f"{r.profile.instructions:,} executed", f"{r.simulate_seconds:.3f}"],
    ]


def level_table(r: FunctionReport) -> str:
    """A row per level: the size of the program there and the time to build it."""
    return _fmt_table(LEVEL_HEAD, _level_rows(r))


KERNEL_HEAD = ("kernel", "kind", "on", "grid", "GFLOP", "instrs", "start", "cycles", "µs", "share")


def _kernel_rows(r: FunctionReport, top: int | None) -> list[list[str]]:
    ks = sorted(r.kernels, key=lambda k: -k.cycles)[:top] if top else r.kernels
    total = r.profile.cycles or 1.0
    per_us = r.profile.machine.clock_ghz * 1000.0
    return [
        [
            k.name,
            k.kind,
            k.dist,
            str(k.points),
            f"{k.flops / 1e9:.3f}",
            f"{k.instructions:,}",
            f"{k.start:,.0f}",
            f"{k.cycles:,.0f}",
            f"{k.cycles / per_us:,.2f}",
            f"{k.cycles / total:.0%}",
        ]
        for k in ks
    ]


def kernel_table(r: FunctionReport, top: int | None = None) -> str:
    """A row per kernel (the ``top`` longest, or all in program order): where it ran, how
    long it took and its share of the run."""
    return _fmt_table(KERNEL_HEAD, _kernel_rows(r, top))


# ---- the HTML page -----------------------------------------------------------------------

_CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
nav a { margin-right: 12px; }
section { margin: 28px 0; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 4px; }
table.pto-report { border-collapse: collapse; font-size: 13px; }
table.pto-report th, table.pto-report td { padding: 2px 10px; text-align: right; }
table.pto-report th:first-child, table.pto-report td:first-child { text-align: left; }
table.pto-report tr:nth-child(even) { background: #f5f5f5; }
pre.pypto-ir { max-height: 600px; overflow: auto; background: #fafafa; padding: 8px; }
div.pto-scroll { max-height: 600px; overflow: auto; border: 1px solid #ddd; }
div.pto-graph { max-height: 900px; overflow: auto; border: 1px solid #eee; }
img { max-width: 100%; }
.pto-ok { color: #070; } .pto-fail { color: #c00; }
"""


def _img(data: bytes, mime: str, alt: str) -> str:
    uri = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    return f"<img alt='{html.escape(alt)}' src='{uri}'>"


def _png(fig: Any, alt: str) -> str:
    return _img(fig._repr_png_(), "image/png", alt)


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table class='pto-report'><tr>{th}</tr>{body}</table>"


def _pre(text: str) -> str:
    return f"<pre class='pypto-ir'>{html.escape(text)}</pre>"


def _view(title: str, make: Callable[[], str]) -> str:
    """A view, or why it could not be drawn (the page still has every other section)."""
    try:
        return make()
    except (ValueError, RuntimeError, OSError) as e:
        return f"<p><i>{html.escape(title)} could not be drawn: {html.escape(str(e))}</i></p>"


def _graph(ir: Any, level: str, alt: str) -> str:
    from pypto.viz import graph

    view = graph(ir, level=level)
    if not view.has_dot():
        return (
            "<p><i>Graphviz's <code>dot</code> is not installed (Debian: apt-get install "
            f"graphviz); the text is below.</i></p>{_pre(view.text)}"
        )
    return f"<div class='pto-graph'>{_img(view.svg().encode(), 'image/svg+xml', alt)}</div>"


def _block_subset(r: FunctionReport, top: int) -> tuple[Any, str]:
    """The Block IR of the ``top`` longest kernels: the whole drawing grows with every kernel,
    and the costly ones are where a reader looks first."""
    bf = r.lowered.block_ir
    if len(bf.kernels) <= top or not r.kernels:
        return bf, "every kernel"
    keep = {k.name for k in sorted(r.kernels, key=lambda k: -k.cycles)[:top]}
    kernels = tuple(k for k in bf.kernels if k.name in keep)
    names = ", ".join(k.name for k in kernels)
    return dataclasses.replace(bf, kernels=kernels), f"the {top} longest kernels: {names}"


def _outputs(prof: Profile) -> list[str]:
    assert prof.request is not None
    return [t.name for t in prof.request.program.tensors if t.role in ("out", "inout")]


def html_page(r: FunctionReport, *, title: str | None = None, block_kernels: int = 3) -> str:
    """The self-contained report page of one function (see :data:`SECTIONS`)."""
    from pypto import viz

    p, lw = r.profile, r.lowered
    check_rows = [
        [
            b,
            c.name,
            f"{c.dtype.short}{list(c.shape)}",
            f"{c.max_abs:.3g}",
            f"{c.max_rel:.3g}",
            f"{c.rtol:.3g}",
            "ok" if c.ok else "FAIL",
        ]
        for b, c in r.check.rows
    ]
    check_head = ("backend", "output", "type", "max |Δ|", "max rel", "rtol", "")
    status = "pto-ok'>all outputs match JAX" if r.check.ok else "pto-fail'>MISMATCH against JAX"
    subset, which = _block_subset(r, block_kernels)
    out_name = _outputs(p)[0]
    parts: dict[str, Callable[[], str]] = {
        "summary": lambda: (
            _html_table(SUMMARY_HEAD, [_summary_row(r)])
            + "<h3>By level</h3>"
            + _html_table(LEVEL_HEAD, _level_rows(r))
            + _pre(p.summary())
        ),
        "check": lambda: f"<p class='{status}</p>" + _html_table(check_head, check_rows),
        "kernels": lambda: _html_table(KERNEL_HEAD, _kernel_rows(r, None)),
        "graph-tensor": lambda: _view("graph", lambda: _graph(lw.tensor_ir, "tensor", "Tensor IR")),
        "graph-tile": lambda: _view("graph", lambda: _graph(lw.tile_ir, "tile", "Tile IR")),
        "graph-block": lambda: (
            f"<p>Showing {html.escape(which)}.</p>"
            + _view("graph", lambda: _graph(subset, "block", "Block IR"))
        ),
        "timeline": lambda: _view("timeline", lambda: _png(viz.timeline(p), "timeline")),
        "memory": lambda: _view("memory", lambda: _png(viz.memory(p), "memory")),
        "tiles": lambda: (
            f"<p>Output <code>{html.escape(out_name)}</code>.</p>"
            + _view("tiles", lambda: _png(viz.tiles(p, out_name), "tiles"))
        ),
        "roofline": lambda: _view(
            "roofline",
            lambda: _png(viz.roofline(p, labels=[r.name.lstrip("_") or "f"]), "roofline"),
        ),
        "ir-tensor": lambda: _pre(str(lw.tensor_ir)),
        "ir-tile": lambda: _pre(str(lw.tile_ir)),
        "ir-block": lambda: _pre(str(lw.block_ir)),
        "ir-isa": lambda: f"<div class='pto-scroll'>{viz.isa(lw.isa).html}</div>",
    }
    body: dict[str, str] = {}
    with progress.stages(f"report {r.name}", [sid for sid, _ in SECTIONS]) as step:
        for sid, _ in SECTIONS:
            step(sid)
            body[sid] = parts[sid]()
    heading = title or f"pypto report: {r.name} on {p.machine.name}"
    nav = "".join(f"<a href='#{sid}'>{html.escape(t)}</a>" for sid, t in SECTIONS)
    sections = "".join(
        f"<section id='{sid}'><h2>{html.escape(t)}</h2>{body[sid]}</section>" for sid, t in SECTIONS
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<link rel='icon' href='data:,'>"
        f"<title>{html.escape(heading)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{html.escape(heading)}</h1><nav>{nav}</nav>{sections}</body></html>\n"
    )


def write(r: FunctionReport, out_dir: str | Path, *, title: str | None = None) -> tuple[Path, Path]:
    """Write ``report.html`` and ``trace.json`` (Chrome trace-event JSON) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    page, trace = out / "report.html", out / "trace.json"
    page.write_text(html_page(r, title=title), encoding="utf-8")
    trace.write_text(json.dumps(r.profile.to_chrome_trace()))
    return page, trace


def write_index(reports: Sequence[FunctionReport], out_dir: str | Path) -> Path:
    """``index.html`` in ``out_dir``: the summary table, each function linking to its report
    in ``out_dir/NAME/report.html``."""
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td><a href='{html.escape(r.name)}/report.html'>{html.escape(c)}</a></td>"
            if i == 0
            else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(_summary_row(r))
        )
        + "</tr>"
        for r in reports
    )
    th = "".join(f"<th>{html.escape(h)}</th>" for h in SUMMARY_HEAD)
    path = Path(out_dir) / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<link rel='icon' href='data:,'><title>pypto reports</title>"
        f"<style>{_CSS}</style></head><body><h1>pypto reports</h1>"
        f"<table class='pto-report'><tr>{th}</tr>{rows}</table></body></html>\n",
        encoding="utf-8",
    )
    return path


@contextlib.contextmanager
def record_jit_calls() -> Iterator[dict[str, tuple[Jitted, tuple[Any, ...]]]]:
    """Inside the block, remember the first concrete call of every ``pto.jit`` function (by
    wrapping :meth:`Jitted.lower`, which calling, lowering and profiling all go through): the
    dict maps a unique name to the function and its arguments. Calls made while tracing
    another function are left out: their arguments are not data."""
    from pypto.graph.tracer import Tracer

    calls: dict[str, tuple[Jitted, tuple[Any, ...]]] = {}
    seen: set[int] = set()
    original = Jitted.lower

    def lower(self: Jitted, *args: Any, snapshots: bool = False) -> Lowered:
        lw = original(self, *args, snapshots=snapshots)
        leaves, _ = pytree.flatten(args)
        if id(self) not in seen and not any(isinstance(x, Tracer) for x in leaves):
            seen.add(id(self))
            base = getattr(self.fn, "__name__", "f")
            base = "".join(c if c.isalnum() or c in "_-" else "_" for c in base).strip("_") or "f"
            name, n = base, 1
            while name in calls:
                n += 1
                name = f"{base}_{n}"
            calls[name] = (self, args)
        return lw

    Jitted.lower = lower  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        Jitted.lower = original  # type: ignore[method-assign]
