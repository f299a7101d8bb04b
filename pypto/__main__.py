"""The command line.

- ``python -m pypto demo [--seq N --hidden N ...]``: the decoder block, compiled, run on the
  simulated NPU, checked against JAX, with a report in ``build/demo/``;
- ``python -m pypto run FILE.py [--machine NAME] [--report DIR] [-- ARGS]``: run a script and
  report on every ``pto.jit`` function it called;
- ``python -m pypto docs``: regenerate docs/ops.md from the op table.
"""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def decoder_block(
    x: Any,
    g1: Any,
    wq: Any,
    wk: Any,
    wv: Any,
    wo: Any,
    g2: Any,
    w1: Any,
    w3: Any,
    w2: Any,
    cos: Any,
    sin: Any,
) -> Any:
    """The decoder block with one argument per weight, so every level names them."""
    from pypto.models import decoder

    p = dict(g1=g1, wq=wq, wk=wk, wv=wv, wo=wo, g2=g2, w1=w1, w3=w3, w2=w2)
    return decoder(x, p, cos, sin)


def _print_report(r: Any, top: int = 8) -> None:
    from pypto import report

    print(report.level_table(r))
    print()
    print(f"the {min(top, len(r.kernels))} longest of {len(r.kernels)} kernels:")
    print(report.kernel_table(r, top=top))
    print()
    print(report.summary_table([r]))
    print()
    print(r.check)


def demo(
    seq: int = 128,
    hidden: int = 256,
    heads: int = 4,
    ffn: int | None = None,
    machine: str = "ascend910b",
    dtype: str = "float16",
    out: str = "build/demo",
) -> int:
    """Compile the LLaMA-style decoder block, run it on the simulated NPU, check it against JAX,
    print the summary and write ``report.html`` and ``trace.json`` into ``out``."""
    import pypto as pto
    from pypto import models, report

    if hidden % heads or (hidden // heads) % 2:
        print(f"hidden {hidden} must split into {heads} heads of an even size", file=sys.stderr)
        return 2
    ffn = ffn or 64 * max(1, round(hidden * 8 / 3 / 64))
    d = pto.dtypes.dtype(dtype)
    p = models.params(hidden, ffn, seed=0, dtype=d)
    cos, sin = (t.astype(d.np) for t in models.rope_tables(seq, hidden // heads))
    x = np.random.default_rng(1).standard_normal((seq, hidden)).astype(d.np)
    args = (x, *p.values(), cos, sin)
    print(f"pypto {pto.__version__} demo: LLaMA-style decoder block on {machine}")
    print(
        f"  seq {seq}, hidden {hidden}, {heads} heads of {hidden // heads}, SwiGLU {ffn}, "
        f"{d.name}: rms_norm, q/k/v with rotary embedding, causal attention, o-projection, "
        "rms_norm, SwiGLU MLP, two residuals"
    )
    print()
    t0 = time.perf_counter()
    r = report.analyze(decoder_block, *args, machine=machine, name="decoder_block")
    t1 = time.perf_counter()
    print(f"compiled, simulated and checked in {t1 - t0:.1f} s")
    print()
    _print_report(r)
    page, trace = report.write(r, out, title=f"pypto demo: decoder block on {machine}")
    print()
    print(f"wrote {page} ({time.perf_counter() - t1:.1f} s) and {trace} (open in Perfetto)")
    return 0 if r.check.ok else 1


def run(path: str, argv: list[str], machine: str | None, report_dir: str) -> int:
    """Run the script at ``path``, then report on every ``pto.jit`` function it called."""
    from pypto import report
    from pypto.report import record_jit_calls

    old_argv = sys.argv
    sys.argv = [path, *argv]
    try:
        with record_jit_calls() as calls:
            runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv = old_argv
    if not calls:
        print(f"{path} called no pto.jit function: nothing to report", file=sys.stderr)
        return 1
    out = Path(report_dir)
    reports = []
    for name, (fn, args) in calls.items():
        print(f"\n== {name}")
        r = report.analyze(fn, *args, machine=machine, name=name)
        page, trace = report.write(r, out / name, title=f"pypto report: {name}")
        _print_report(r)
        print(f"wrote {page} and {trace}")
        reports.append(r)
    index = report.write_index(reports, out)
    print()
    print(report.summary_table(reports))
    print(f"\nwrote {index}")
    return 0 if all(r.check.ok for r in reports) else 1


def docs(out_dir: str = "docs") -> int:
    """Regenerate the docs that come from code (docs/ops.md)."""
    from pypto.ops import catalog

    path = Path(out_dir) / "ops.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(catalog.markdown())
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pypto", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    dm = sub.add_parser("demo", help="compile, run and report on the decoder block")
    dm.add_argument("--seq", type=int, default=128)
    dm.add_argument("--hidden", type=int, default=256)
    dm.add_argument("--heads", type=int, default=4)
    dm.add_argument("--ffn", type=int, default=None, help="default: about 8/3 of hidden")
    dm.add_argument("--dtype", default="float16")
    dm.add_argument("--machine", default="ascend910b")
    dm.add_argument("--out", default="build/demo")
    rn = sub.add_parser("run", help="run a script and report on its pto.jit functions")
    rn.add_argument("file")
    rn.add_argument("args", nargs="*", help="the script's own arguments, after --")
    rn.add_argument("--machine", default=None, help="default: each function's own")
    rn.add_argument("--report", default="build/report", help="the report directory")
    d = sub.add_parser("docs", help="regenerate docs/ops.md from the op table")
    d.add_argument("--out", default="docs")
    argv = list(sys.argv[1:] if argv is None else argv)
    # everything after `--` belongs to the script that `run` runs
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: len(argv) - len(extra) - (1 if "--" in argv else 0)])
    if args.cmd == "demo":
        return demo(args.seq, args.hidden, args.heads, args.ffn, args.machine, args.dtype, args.out)
    if args.cmd == "run":
        return run(args.file, [*args.args, *extra], args.machine, args.report)
    return docs(args.out)


if __name__ == "__main__":
    sys.exit(main())
