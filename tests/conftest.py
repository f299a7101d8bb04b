"""Shared test set-up: hypothesis profiles (deterministic on CI) and small helpers."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Every pass manager run in the tests verifies the IR after each pass.
os.environ["PYPTO_VERIFY"] = "1"
# ... and every program run on the simulated NPU is checked for the machine-model invariants.
os.environ.setdefault("PYPTO_CHECK_SIM", "1")

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
