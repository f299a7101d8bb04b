"""Shared test set-up: hypothesis profiles (deterministic on CI) and small helpers."""

from __future__ import annotations

import os
import sys

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

# Hypothesis (6.170) makes each run of a parametrized @given test's settings fall back on the
# previous run's, so the chain grows by one per parametrization, and with the CI profile's
# database=None every run walks it to the root. test_library_matches_jax has hundreds of
# parametrizations: on one worker the walk passed the default limit of 1000 frames.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

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
