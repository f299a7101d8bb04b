"""The op catalog as markdown, generated from the op table (docs/ops.md is this output)."""

from __future__ import annotations

from pypto.ops.table import OPS, Op

_KIND_ORDER = (
    "elementwise",
    "reduce",
    "scan",
    "sort",
    "matmul",
    "layout",
    "kernel",
    "call",
    "effect",
    "composite",
)


def _dtypes(op: Op) -> str:
    if op.is_composite:
        return "as its parts"
    return ", ".join(d.short for d in op.dtypes)


def _aliases() -> list[str]:
    """A paragraph naming numpy's other names for ops (``pto.absolute`` is ``pto.abs``)."""
    import pypto.ops as public

    by_fn = {id(getattr(public, n)): n for n in OPS if callable(getattr(public, n, None))}
    pairs = sorted(
        (n, by_fn[id(getattr(public, n))])
        for n in public.__all__
        if n not in OPS and id(getattr(public, n)) in by_fn
    )
    if not pairs:
        return []
    names = ", ".join(f"`{a}` (`{b}`)" for a, b in pairs)
    text = f"numpy's other names are the same functions: {names}."
    out, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > 88:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*out, line, ""]


def markdown() -> str:
    """A markdown page with one table row per op, grouped by kind."""
    lines = [
        "# Ops",
        "",
        "Generated from the op table (`pypto/ops/`) by `python -m pypto docs`; do not edit.",
        "Every op is checked against its JAX reference in the tests.",
        "",
        "Integer and bool inputs to floating ops (exp, log, sqrt, rsqrt, reciprocal, tanh,",
        "sigmoid, sin, cos, div) are promoted to float32 first, as `jax.numpy` does;",
        "`neg`, `abs`, `sub` and `pow` refuse bool, and `matmul` refuses bool.",
        "",
        "The operators `&`, `|`, `^` and `~` are `logical_and`, `logical_or`, `logical_xor`",
        "and `logical_not` on bool tensors and `bitwise_and`, `bitwise_or`, `bitwise_xor` and",
        "`bitwise_not` on integers, as numpy's are; on floats they are refused (the logical",
        "functions take nonzero as True, as numpy's and JAX's do). `<<` and `>>` are",
        "`left_shift` and `right_shift` (arithmetic), with JAX's results past the width.",
        "`//` and `%` are `floor_divide` and `remainder` (JAX's integer results for a zero",
        "divisor: `x // 0` is -1 or -2, `x % 0` is 0; `fmod` keeps the sign of the dividend).",
        "",
        "`x[key]`: basic indexing (ints, slices with any step, None, `...`) is `slice` then",
        "`reshape`. Integer arrays among those entries (lists, numpy arrays or tensors) are",
        "numpy's advanced indexing: they broadcast together, the axes they index are merged",
        "into one and a `take` gathers along it, the result's axes where numpy puts them.",
        "Boolean masks known when tracing (numpy arrays, lists) are their `nonzero` arrays; a",
        "traced mask is refused (its result's shape would depend on data).",
        "",
        "Tensors are immutable: `x.at[key].set(y)`, `.add`, `.subtract`, `.multiply`,",
        "`.divide`, `.power`, `.min`, `.max`, `.apply(f)` and `.get()` are JAX's functional",
        "updates (pypto/ops/indexing.py). The block `x[key]` is sliced out, updated along the",
        "merged axis and put back with `lax_pad` and a mask. Positions known when tracing",
        "are resolved in numpy, one gather of update rows per round of repeats. Traced positions",
        "go through a one-hot against an iota: `set` gathers each position's last update and",
        "a float `add` is a matmul (infinities and NaN counted beside it); `multiply`, `min`,",
        "`max` and integer sums sort the updates by position and combine each run of equals",
        "with a segmented scan of ⌈log₂ K⌉ shifted steps, then gather each run's total.",
        "Out-of-range positions are dropped, as JAX's are, or clamped with `mode='clip'`.",
        "",
        *_aliases(),
        "`pto.tile` is both the Tile level's package (`pto.tile.load`, ...) and, called,",
        "numpy's `tile`.",
        "",
        "| op | kind | dtypes | differentiable | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    ops = sorted(OPS.values(), key=lambda o: (_KIND_ORDER.index(o.kind), o.name))
    for op in ops:
        kind = "composite" if op.is_composite else f"primitive ({op.kind})"
        diff = "yes" if op.differentiable else "no"
        doc = op.doc.replace("|", "\\|")
        lines.append(f"| `{op.name}` | {kind} | {_dtypes(op)} | {diff} | {doc} |")
    lines.append("")
    return "\n".join(lines)
