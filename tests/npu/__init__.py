"""Tests of the simulated NPU (pypto.npu)."""
