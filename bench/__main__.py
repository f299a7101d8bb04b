"""The benchmark runner: ``python -m bench [--only NAME] [--quick] [--out DIR] [--list]``.

Runs the registered groups (all, or those named by ``--only``), prints a markdown table per
group to stdout (progress goes to stderr) and writes, under ``--out`` (``bench/results/``):

- ``<group>.json``: the group's rows with the machine description and the settings;
- ``latest.json``: the machine description and every group run by this invocation.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
import timeit
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench import Group, Row, Settings, groups

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent

ENV_VARS = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "XLA_FLAGS",
    "JAX_PLATFORMS",
)
"""Environment variables that change what is measured; recorded, never changed."""


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: other work on the machine adds noise."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _blas() -> dict[str, Any] | None:
    import numpy as np

    try:
        config: Any = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return {k: blas.get(k) for k in ("name", "version", "openblas configuration")}
    except Exception:  # older numpy or an unusual build: the versions below still identify it
        return None


def loop_overhead() -> float:
    """Seconds per iteration of an empty timeit loop (the floor under every timed call)."""
    t = timeit.Timer("pass")
    return min(t.repeat(5, 100_000)) / 100_000


def machine_info() -> dict[str, Any]:
    """What the numbers depend on: CPU, library versions, thread and BLAS settings, commit."""
    import jax
    import jaxlib
    import numpy as np

    import pypto

    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    env = {k: os.environ.get(k) for k in ENV_VARS}
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain")
    return {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "load_average": _load(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", None),
        "jax_backend": jax.default_backend(),
        "pypto": pypto.__version__,
        "blas": _blas(),
        "env": env,
        "openblas_env_set": {k: env[k] is not None for k in ENV_VARS if k.startswith("OPENBLAS")},
        "git_commit": commit,
        "git_dirty": bool(status) if status is not None else None,
        "loop_overhead_s": loop_overhead(),
    }


def markdown_table(group: Group, rows: Sequence[Row]) -> str:
    """The rows as a markdown table with the group's columns."""
    head = "| " + " | ".join(c.header for c in group.columns) + " |"
    rule = "| " + " | ".join("---:" if c.align == "right" else "---" for c in group.columns) + " |"
    body = ["| " + " | ".join(c.fmt(r.get(c.key)) for c in group.columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def summary(rows: Sequence[Row]) -> str:
    judged = [r for r in rows if r.get("met") is not None]
    met = sum(1 for r in judged if r["met"])
    return f"targets met: {met} of {len(judged)}"


def run_group(group: Group, settings: Settings) -> tuple[list[Row], float]:
    """All rows of ``group`` and the seconds they took; each row is reported on stderr."""
    start = time.perf_counter()
    rows: list[Row] = []
    for row in group.run(settings):
        rows.append(row)
        label = " ".join(str(row[c.key]) for c in group.columns[:2])
        print(f"  {group.name}: {label}", file=sys.stderr, flush=True)
    return rows, time.perf_counter() - start


def render(group: Group, rows: Sequence[Row]) -> str:
    parts = [f"## {group.name}: {group.title}", "", markdown_table(group, rows), ""]
    parts += [*group.notes, summary(rows), ""]
    return "\n".join(parts)


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def run(
    selected: Iterable[Group], settings: Settings, out: Path | None, machine: dict[str, Any]
) -> dict[str, Any]:
    """Run ``selected``, print their tables, write their JSON under ``out`` (unless None)."""
    report: dict[str, Any] = {
        "machine": machine,
        "settings": {
            "quick": settings.quick,
            "repeats": settings.repeats,
            "batch_seconds": settings.batch_seconds,
            "case_seconds": settings.case_seconds,
        },
        "groups": {},
    }
    for group in selected:
        print(f"running {group.name} ...", file=sys.stderr, flush=True)
        rows, secs = run_group(group, settings)
        print(render(group, rows), flush=True)
        entry = {"title": group.title, "seconds": secs, "load_average_after": _load(), "rows": rows}
        report["groups"][group.name] = entry
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            single = {"group": group.name, "machine": machine, "settings": report["settings"]}
            _write_json(out / f"{group.name}.json", {**single, **entry})
    if out is not None:
        _write_json(out / "latest.json", report)
    return report


def parse_args(argv: Sequence[str] | None, names: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help=f"run only this group (repeatable, or comma-separated); groups: {', '.join(names)}",
    )
    p.add_argument("--quick", action="store_true", help="few repetitions (smoke tests)")
    p.add_argument(
        "--out", type=Path, default=RESULTS, help=f"directory for the JSON (default {RESULTS})"
    )
    p.add_argument("--no-write", action="store_true", help="print the tables, write no JSON")
    p.add_argument("--list", action="store_true", help="list the groups and exit")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    registry = groups()
    args = parse_args(argv, list(registry))
    if args.list:
        for g in registry.values():
            print(f"{g.name}: {g.title}")
        return 0
    wanted = [n for spec in args.only or [] for n in spec.split(",") if n]
    unknown = [n for n in wanted if n not in registry]
    if unknown:
        print(
            f"unknown benchmark group(s) {', '.join(unknown)}; known: {', '.join(registry)}",
            file=sys.stderr,
        )
        return 2
    selected = [registry[n] for n in wanted] if wanted else list(registry.values())
    settings = Settings.for_mode(args.quick)
    machine = machine_info()
    openblas = ", ".join(
        f"{k}={machine['env'][k]}" for k, v in machine["openblas_env_set"].items() if v
    )
    print(
        f"# pypto benchmarks — {machine['date']}\n\n"
        f"{machine['cpu']} · {machine['cpu_count']} CPUs · python {machine['python']} · "
        f"numpy {machine['numpy']} · jax {machine['jax']} ({machine['jax_backend']})"
        + (f" · {openblas}" if openblas else "")
        + (" · **quick mode**" if settings.quick else "")
        + "\n",
        flush=True,
    )
    run(selected, settings, None if args.no_write else args.out, machine)
    if not args.no_write:
        print(f"results written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
