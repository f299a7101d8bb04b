"""Eager dispatch overhead: one pypto op call against numpy and JAX eager on the same data.

For each op and shape, three candidates are timed side by side (see :mod:`bench.timing`):

- ``pypto``: the public API, ``pto.add(x, y)`` on eager Tensors;
- ``numpy``: ``np.add(a, b)`` on the very arrays those Tensors hold;
- ``jax``: ``jnp.add(a, b).block_until_ready()`` on CPU device arrays made beforehand.

At 8x8 the op itself is a few nanoseconds, so the time is the dispatch overhead; at 1024x1024 the
work dominates and pypto should cost what numpy costs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import pypto as pto
from bench import Column, Group, Row, Settings, register
from bench.timing import Candidate, interleaved, paired_ratio

TIMES = "\N{MULTIPLICATION SIGN}"

SMALL = (8, 8)
LARGE = (1024, 1024)
SHAPES: tuple[tuple[int, int], ...] = (SMALL, LARGE)

SMALL_VS_NUMPY = 3.0
"""8x8: pypto may take at most this many times numpy's time ..."""
SMALL_VS_JAX = 1.0
"""... and must be faster than JAX eager (strictly below this ratio)."""
LARGE_VS_NUMPY = 1.2
"""1024x1024: pypto may take at most this many times numpy's time."""


@dataclass(frozen=True)
class OpCase:
    """One op in its three spellings, all taking the same number of arguments."""

    name: str
    pypto: Callable[..., Any]
    numpy: Callable[..., Any]
    jax: Callable[..., Any]
    arity: int


OPS: tuple[OpCase, ...] = (
    OpCase("add", pto.add, np.add, jnp.add, 2),
    OpCase("mul", pto.mul, np.multiply, jnp.multiply, 2),
    OpCase("exp", pto.exp, np.exp, jnp.exp, 1),
    OpCase("matmul", pto.matmul, np.matmul, jnp.matmul, 2),
    OpCase("sum", pto.sum, np.sum, jnp.sum, 1),
)


def shape_text(shape: tuple[int, ...]) -> str:
    return TIMES.join(map(str, shape))


def target_for(shape: tuple[int, ...]) -> tuple[str, Callable[[float, float], bool]]:
    """The target's text and its test on (pypto/numpy, pypto/jax)."""
    if shape == SMALL:
        return (
            f"≤{SMALL_VS_NUMPY:g}{TIMES} numpy, <{SMALL_VS_JAX:g}{TIMES} jax",
            lambda r_np, r_jax: r_np <= SMALL_VS_NUMPY and r_jax < SMALL_VS_JAX,
        )
    return (f"≤{LARGE_VS_NUMPY:g}{TIMES} numpy", lambda r_np, r_jax: r_np <= LARGE_VS_NUMPY)


def _check(case: OpCase, shape: tuple[int, ...], got: Any, want: Any, jax_out: Any) -> None:
    """The three candidates compute the same thing (a benchmark of a wrong result is void)."""
    got, want, jax_out = np.asarray(got), np.asarray(want), np.asarray(jax_out)
    scale = max(1.0, float(np.abs(want).max()))
    for who, v in (("pypto", got), ("jax", jax_out)):
        if v.shape != want.shape or not np.allclose(v, want, rtol=1e-3, atol=1e-4 * scale):
            raise RuntimeError(f"{case.name} {shape_text(shape)}: {who} disagrees with numpy")


def candidates(case: OpCase, shape: tuple[int, ...], seed: int = 0) -> dict[str, Candidate]:
    """The three candidates for ``case`` at ``shape``, on float32 inputs, checked for agreement."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(case.arity)]
    tensors = [pto.tensor(a) for a in arrays]
    # Time numpy on the arrays the Tensors hold, so both read the same memory.
    held = [np.asarray(t) for t in tensors]
    cpu = jax.devices("cpu")[0]
    device = [jax.device_put(a, cpu) for a in arrays]
    for d in device:
        d.block_until_ready()
    _check(case, shape, case.pypto(*tensors), case.numpy(*held), case.jax(*device))
    args = ", ".join("abc"[: case.arity])
    call = f"f({args})"

    def names(f: Callable[..., Any], xs: list[Any]) -> dict[str, Any]:
        return {"f": f, **dict(zip("abc", xs))}

    return {
        "pypto": Candidate(call, names(case.pypto, tensors)),
        "numpy": Candidate(call, names(case.numpy, held)),
        "jax": Candidate(f"{call}.block_until_ready()", names(case.jax, device)),
    }


def run(settings: Settings) -> Iterator[Row]:
    for shape in SHAPES:
        target, met = target_for(shape)
        for case in OPS:
            stats = interleaved(
                candidates(case, shape),
                settings.repeats,
                settings.batch_seconds,
                max_seconds=settings.case_seconds,
                min_repeats=min(settings.repeats, 11),
            )
            p, n, j = (stats[k].median for k in ("pypto", "numpy", "jax"))
            yield {
                "benchmark": case.name,
                "shape": shape_text(shape),
                "dtype": "float32",
                "pypto_s": p,
                "numpy_s": n,
                "jax_s": j,
                "pypto_over_numpy": p / n,
                "pypto_over_jax": p / j,
                "target": target,
                "met": met(p / n, p / j),
                # The median of per-round ratios: a cross-check, robust to slow spells.
                "pypto_over_numpy_paired": paired_ratio(stats["pypto"], stats["numpy"]),
                "pypto_over_jax_paired": paired_ratio(stats["pypto"], stats["jax"]),
                "stats": {k: s.as_dict() for k, s in stats.items()},
            }


def seconds(v: float) -> str:
    """A duration with three significant digits in ns, µs, ms or s."""
    for unit, scale in (("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3)):
        if v < 1000 * scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} s"


def ratio(v: float) -> str:
    return f"{v:.2f}{TIMES}"


def yes_no(v: bool | None) -> str:
    return "" if v is None else "yes" if v else "**no**"


GROUP = register(
    Group(
        name="eager_overhead",
        title="Eager dispatch: time per op call (float32, median)",
        columns=(
            Column("benchmark", "benchmark"),
            Column("shape", "shape"),
            Column("pypto", "pypto_s", seconds, "right"),
            Column("numpy", "numpy_s", seconds, "right"),
            Column("jax", "jax_s", seconds, "right"),
            Column("pypto/numpy", "pypto_over_numpy", ratio, "right"),
            Column("pypto/jax", "pypto_over_jax", ratio, "right"),
            Column("target", "target"),
            Column("met", "met", yes_no),
        ),
        run=run,
        notes=(
            "pypto: `pto.op(x, ...)` on eager Tensors; numpy: `np.op` on the same arrays; "
            "jax: `jnp.op(...).block_until_ready()` on CPU device arrays.",
            "Times include the timing loop's own cost per call (see `loop_overhead_s` in the "
            "JSON), alike for all three.",
        ),
    )
)
