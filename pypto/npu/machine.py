"""Machine configurations of the simulated NPU: frozen dataclasses, one table of named machines.

Every figure of the ``ascend910b`` machine comes from a public source (``docs/machine.md`` lists
them, with the estimates and calibrated values marked). ``tiny`` is the same chip with a single
cluster (1 cube core + 2 vector cores), for fast tests and teaching. ``.replace(...)`` makes a
custom machine and validates it.

>>> from pypto.npu import machine
>>> m = machine("ascend910b")
>>> m.n_aic, m.n_aiv, m.clock_ghz
(24, 48, 1.85)
>>> round(m.cube_tflops_f16)
364
>>> small = m.replace(clusters=4, name="quarter")
>>> small.n_aiv
8
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, fields
from typing import Any

from pypto.core.errors import PyptoError

__all__ = ["MACHINES", "Machine", "MachineError", "machine"]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


class MachineError(PyptoError, ValueError):
    """An unknown machine name or an invalid machine configuration."""


@dataclass(frozen=True)
class Machine:
    """One NPU: core counts, clock, compute rates, buffer sizes, bandwidths and the cost table.

    Rates are bytes per cycle of the core's clock unless the name says otherwise; latencies are
    cycles. Fields marked *estimate* in ``docs/machine.md`` have no public figure.
    """

    name: str
    # --- cores ---
    clusters: int = 24
    """Cube cores (AIC); each forms a cluster with ``aiv_per_cluster`` vector cores (AIV)."""
    aiv_per_cluster: int = 2
    clock_ghz: float = 1.85
    # --- compute ---
    cube_m: int = 16
    cube_n: int = 16
    cube_k_f16: int = 16
    """K depth of one cube issue for float16/bfloat16 (16x16x16 MACs per cycle)."""
    cube_k_i8: int = 32
    """K depth of one cube issue for int8 (16x32x16 MACs per cycle)."""
    vector_bytes: int = 256
    """Vector unit width: bytes of elements processed per cycle (128 fp16 / 64 fp32 lanes)."""
    # --- on-chip buffers (bytes) ---
    l1_bytes: int = 512 * KiB
    l0a_bytes: int = 64 * KiB
    l0b_bytes: int = 64 * KiB
    l0c_bytes: int = 128 * KiB
    ub_bytes: int = 192 * KiB
    align_bytes: int = 32
    """Every on-chip tile address must be a multiple of this (UB's 32-byte block)."""
    # --- shared memory system ---
    l2_bytes: int = 192 * MiB
    l2_line_bytes: int = 512
    """GM requests are handled in 512-byte aligned units (Ascend C best practices)."""
    hbm_bytes: int = 64 * GiB
    hbm_gbps: float = 1600.0
    """Shared HBM bandwidth in GB/s (10^9 bytes per second)."""
    l2_gbps: float = 5600.0
    """Shared L2 bandwidth in GB/s (the CANN guide: more than 3x HBM)."""
    # --- per-core transfer rates (bytes per cycle) ---
    gm_read: float = 32.0
    """GM (HBM) → core, for bytes that miss L2."""
    l2_read: float = 110.0
    l2_write: float = 86.0
    """Core → GM through FIX (L0C → GM)."""
    l1_l0a: float = 512.0
    l1_l0b: float = 256.0
    l1_ub: float = 128.0
    """UB <-> L1 within a cluster (only with ``direct_cube_vector``)."""
    l0c_ub: float = 256.0
    """L0C → UB or L0C → L1 through FIX."""
    ub_gm: float = 64.0
    """UB → GM (MTE3)."""
    # --- latencies (cycles) ---
    dma_latency: int = 90
    """Start-up latency of a GM transfer (MTE2/MTE3/FIX to or from GM); calibrated, see
    docs/machine.md."""
    local_latency: int = 20
    """Start-up latency of an on-chip transfer (MTE1, FIX to UB/L1, UB ↔ L1)."""
    cube_latency: int = 20
    vector_latency: int = 10
    issue_cycles: int = 1
    """Front-end (scalar unit) cycles to issue one instruction of any kind."""
    flag_latency: int = 2
    """SET_FLAG to the matching WAIT_FLAG within a core."""
    cross_flag_latency: int = 100
    """Cross-core flag between the cube core and a vector core of one cluster."""
    barrier_latency: int = 2000
    """GM barrier across all cores of a launch, after the last core arrives."""
    # --- vector cost factors (multiply the ⌈bytes/256⌉ term) ---
    vec_factor_div: float = 2.0
    """div, reciprocal, sqrt, rsqrt."""
    vec_factor_transcendental: float = 4.0
    """exp, log, tanh, sigmoid, sin, cos, gelu."""
    # --- sync resources ---
    event_ids: int = 8
    """Event ids per (source pipe, destination pipe) pair for SET_FLAG/WAIT_FLAG."""
    cross_flag_ids: int = 8
    """Cross-core flag ids per direction per peer in a cluster."""
    direct_cube_vector: bool = False
    """Whether L0C → UB and UB → L1 paths join the cube and vector cores of a cluster (A5-style).
    On A2/A3 (False) the cube and vector cores hand tiles over through GM."""

    def __post_init__(self) -> None:
        _validate(self)

    # --- derived figures ---
    @property
    def n_aic(self) -> int:
        """Cube cores."""
        return self.clusters

    @property
    def n_aiv(self) -> int:
        """Vector cores."""
        return self.clusters * self.aiv_per_cluster

    @property
    def hz(self) -> float:
        return self.clock_ghz * 1e9

    @property
    def hbm_bytes_per_cycle(self) -> float:
        return self.hbm_gbps * 1e9 / self.hz

    @property
    def l2_bytes_per_cycle(self) -> float:
        return self.l2_gbps * 1e9 / self.hz

    @property
    def cube_tflops_f16(self) -> float:
        """Peak float16 cube throughput of the whole chip (2 FLOPs per MAC)."""
        macs = self.cube_m * self.cube_k_f16 * self.cube_n
        return 2 * macs * self.n_aic * self.hz / 1e12

    def buffer_bytes(self, space: str) -> int:
        """Capacity of one on-chip buffer: ``"L1"``, ``"L0A"``, ``"L0B"``, ``"L0C"`` or ``"UB"``."""
        return {
            "L1": self.l1_bytes,
            "L0A": self.l0a_bytes,
            "L0B": self.l0b_bytes,
            "L0C": self.l0c_bytes,
            "UB": self.ub_bytes,
        }[space]

    def replace(self, **changes: Any) -> Machine:
        """A copy with ``changes`` applied and validated.

        >>> machine("tiny").replace(ub_bytes=100)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
          ...
        pypto.npu.machine.MachineError: machine 'tiny': ub_bytes = 100 is not a multiple of ...
        """
        known = {f.name for f in fields(self)}
        for key in changes:
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.5)
                raise MachineError(
                    f"machine {self.name!r} has no field {key!r}",
                    hint=("did you mean " + ", ".join(close) + "?")
                    if close
                    else "fields: " + ", ".join(sorted(known)),
                )
        return dataclasses.replace(self, **changes)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from pypto.core.display import table

        rows = [
            ("cores", f"{self.n_aic} AIC (cube) + {self.n_aiv} AIV (vector)"),
            ("clock", f"{self.clock_ghz} GHz"),
            ("cube peak fp16", f"{self.cube_tflops_f16:,.0f} TFLOPS"),
            ("vector", f"{self.vector_bytes} B/cycle per core"),
            (
                "L1 / L0A / L0B / L0C",
                f"{self.l1_bytes // KiB} / {self.l0a_bytes // KiB} / "
                f"{self.l0b_bytes // KiB} / {self.l0c_bytes // KiB} KiB",
            ),
            ("UB", f"{self.ub_bytes // KiB} KiB per AIV"),
            ("L2", f"{self.l2_bytes // MiB} MiB, {self.l2_gbps:,.0f} GB/s"),
            ("HBM", f"{self.hbm_gbps:,.0f} GB/s"),
        ]
        return {"text/plain": self.describe(), "text/html": table(rows, f"machine {self.name}")}

    def describe(self) -> str:
        """A short human-readable summary."""
        return (
            f"{self.name}: {self.n_aic} AIC + {self.n_aiv} AIV at {self.clock_ghz} GHz, "
            f"cube {self.cube_tflops_f16:.0f} TFLOPS fp16, L1 {self.l1_bytes // KiB} KiB, "
            f"UB {self.ub_bytes // KiB} KiB, L2 {self.l2_bytes // MiB} MiB, "
            f"HBM {self.hbm_gbps / 1000:.2f} TB/s"
        )


_INT_FIELDS_POSITIVE = (
    "clusters",
    "aiv_per_cluster",
    "cube_m",
    "cube_n",
    "cube_k_f16",
    "cube_k_i8",
    "vector_bytes",
    "l1_bytes",
    "l0a_bytes",
    "l0b_bytes",
    "l0c_bytes",
    "ub_bytes",
    "align_bytes",
    "l2_bytes",
    "l2_line_bytes",
    "hbm_bytes",
    "issue_cycles",
    "event_ids",
    "cross_flag_ids",
)
_INT_FIELDS_NONNEG = (
    "dma_latency",
    "local_latency",
    "cube_latency",
    "vector_latency",
    "flag_latency",
    "cross_flag_latency",
    "barrier_latency",
)
_FLOAT_FIELDS_POSITIVE = (
    "clock_ghz",
    "hbm_gbps",
    "l2_gbps",
    "gm_read",
    "l2_read",
    "l2_write",
    "l1_l0a",
    "l1_l0b",
    "l1_ub",
    "l0c_ub",
    "ub_gm",
    "vec_factor_div",
    "vec_factor_transcendental",
)


def _validate(m: Machine) -> None:
    def bad(msg: str, hint: str | None = None) -> MachineError:
        return MachineError(f"machine {m.name!r}: {msg}", hint=hint)

    if not isinstance(m.name, str) or not m.name:
        raise MachineError("a machine needs a non-empty name")
    for f in _INT_FIELDS_POSITIVE:
        v = getattr(m, f)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise bad(f"{f} = {v!r} must be a positive integer")
    for f in _INT_FIELDS_NONNEG:
        v = getattr(m, f)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise bad(f"{f} = {v!r} must be a non-negative integer")
    for f in _FLOAT_FIELDS_POSITIVE:
        v = getattr(m, f)
        if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
            raise bad(f"{f} = {v!r} must be a positive number")
    if not isinstance(m.direct_cube_vector, bool):
        raise bad(f"direct_cube_vector = {m.direct_cube_vector!r} must be a bool")
    if m.align_bytes & (m.align_bytes - 1):
        raise bad(f"align_bytes = {m.align_bytes} must be a power of two")
    for f in ("l1_bytes", "l0a_bytes", "l0b_bytes", "l0c_bytes", "ub_bytes"):
        v = getattr(m, f)
        if v % m.align_bytes:
            raise bad(f"{f} = {v} is not a multiple of align_bytes = {m.align_bytes}")
    if m.l2_line_bytes & (m.l2_line_bytes - 1):
        raise bad(f"l2_line_bytes = {m.l2_line_bytes} must be a power of two")
    if m.l2_bytes < m.l2_line_bytes:
        raise bad(f"l2_bytes = {m.l2_bytes} is smaller than one line ({m.l2_line_bytes} bytes)")
    if m.aiv_per_cluster > 2:
        raise bad(
            f"aiv_per_cluster = {m.aiv_per_cluster}: a cluster has at most 2 vector cores",
            hint="the ISA names the vector cores of a cluster aiv0 and aiv1",
        )


MACHINES: dict[str, Machine] = {
    "ascend910b": Machine(name="ascend910b"),
    "tiny": Machine(name="tiny", clusters=1),
}
"""The named machines: ``ascend910b`` (24 clusters) and ``tiny`` (the same chip, 1 cluster)."""


def machine(name: str | Machine) -> Machine:
    """The named machine (``"ascend910b"`` or ``"tiny"``); a :class:`Machine` passes through.

    >>> machine("tiny").describe()  # doctest: +ELLIPSIS
    'tiny: 1 AIC + 2 AIV at 1.85 GHz, cube 15 TFLOPS fp16, L1 512 KiB, UB 192 KiB, ...'
    """
    if isinstance(name, Machine):
        return name
    m = MACHINES.get(name) if isinstance(name, str) else None
    if m is None:
        close = difflib.get_close_matches(str(name), list(MACHINES), n=1)
        raise MachineError(
            f"unknown machine {name!r}",
            hint=(f"did you mean {close[0]!r}? " if close else "")
            + "known machines: "
            + ", ".join(sorted(MACHINES))
            + "; make a custom one with machine('ascend910b').replace(...)",
        )
    return m
