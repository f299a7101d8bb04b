"""Shared test set-up: hypothesis profiles (deterministic on CI) and small helpers."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Every pass manager run in the tests verifies the IR after each pass.
os.environ["PYPTO_VERIFY"] = "1"
# ... and every program run on the simulated NPU is checked for the machine-model invariants.
os.environ.setdefault("PYPTO_CHECK_SIM", "1")
# The JAX references are thousands of tiny programs, each compiled once: XLA's CPU compiler
# without LLVM optimisation and with its classic emitters compiles them about twice as fast.
# Neither is fast math; a transcendental may come out 1-2 ulp apart, as XLA's vectorised and
# scalar loops already do between two lengths, well inside the tolerance table. XLA reads the
# flags when the first JAX computation starts its backend, after this file is loaded.
os.environ["XLA_FLAGS"] = " ".join(
    [
        os.environ.get("XLA_FLAGS", ""),
        "--xla_backend_optimization_level=0",
        "--xla_cpu_use_fusion_emitters=false",
    ]
).strip()

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("PYPTO_HYPOTHESIS", "ci" if os.environ.get("CI") else "dev"))
