"""The command line: ``python -m pypto demo`` and ``python -m pypto docs``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def _mlp(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    import pypto as pto

    return pto.gelu(x @ w1 + b1) @ w2 + b2


def _mlp_jax(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    import jax
    import jax.numpy as jnp

    def mm(a: Any, b: Any) -> Any:
        return jnp.matmul(a, b, preferred_element_type=jnp.float32).astype(a.dtype)

    return mm(jax.nn.gelu(mm(x, w1) + b1, approximate=True), w2) + b2


def demo() -> int:
    """A two-layer MLP forward in float16 and bfloat16, eagerly, checked against JAX."""
    import pypto as pto
    from pypto.reference import compare

    batch, d_in, d_hidden, d_out = 64, 256, 512, 128
    print(f"pypto {pto.__version__} demo: two-layer MLP  gelu(x @ w1 + b1) @ w2 + b2")
    print(f"  x: [{batch},{d_in}]  w1: [{d_in},{d_hidden}]  w2: [{d_hidden},{d_out}]")
    print()
    ok = True
    for dtype in (pto.float16, pto.bfloat16):
        args = [
            pto.random.normal(0, (batch, d_in), dtype),
            pto.random.normal(1, (d_in, d_hidden), dtype, std=d_in**-0.5),
            pto.random.normal(2, (d_hidden,), dtype, std=0.1),
            pto.random.normal(3, (d_hidden, d_out), dtype, std=d_hidden**-0.5),
            pto.random.normal(4, (d_out,), dtype, std=0.1),
        ]
        t0 = time.perf_counter()
        y = _mlp(*args)
        t_eager = time.perf_counter() - t0
        ref = np.asarray(_mlp_jax(*(np.asarray(a) for a in args)))
        c = compare(f"mlp[{dtype.name}]", y, ref, k=d_hidden)
        ok &= c.ok
        print(f"  eager {dtype.name:<8} {t_eager * 1e3:7.2f} ms   vs JAX: {c}")
    print()
    print("all outputs agree with JAX" if ok else "MISMATCH against JAX")
    return 0 if ok else 1


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
    sub.add_parser("demo", help="run the demo")
    d = sub.add_parser("docs", help="regenerate docs/ops.md from the op table")
    d.add_argument("--out", default="docs")
    args = parser.parse_args(argv)
    if args.cmd == "demo":
        return demo()
    return docs(args.out)


if __name__ == "__main__":
    sys.exit(main())
