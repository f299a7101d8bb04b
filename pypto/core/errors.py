"""The error hierarchy and the user's source location.

Every user mistake raises a :class:`PyptoError` subclass whose message names the op, the shapes
and dtypes involved and the caller's own ``file:line``, with an optional hint. Internal frames
are cut from the traceback at the dispatch boundary so the user sees their own line first.

An op traced by the user's own code is placed at the user's line (:func:`user_location`). An op
that pypto emits on the user's behalf — a recorded equation re-bound into an enclosing trace, the
forward pass replayed by autodiff, the equations of a VJP rule — is placed, via
:class:`at_location`, at the line of the equation it comes from (:func:`op_location`).
"""

from __future__ import annotations

import contextvars
import os
import sys
import types
from dataclasses import dataclass
from typing import Self

__all__ = [
    "BoundsError",
    "ConversionError",
    "DTypeError",
    "NumericsMismatch",
    "PyptoError",
    "ShapeError",
    "SimulationError",
    "SourceLoc",
    "TileError",
    "TraceError",
    "at_location",
    "op_location",
    "strip_internal_frames",
    "user_location",
]

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SKIP_PREFIXES = (_PKG_DIR,)


@dataclass(frozen=True, slots=True)
class SourceLoc:
    """A place in the user's code: ``file`` (full path) and ``line``."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"


def _is_internal(filename: str) -> bool:
    # "<pto frontend ...>": the simulator's generated front ends (pypto.npu.compile)
    return filename.startswith(_SKIP_PREFIXES) or filename.startswith(("<frozen", "<pto "))


def user_location(depth: int = 1) -> SourceLoc | None:
    """The innermost frame outside the pypto package: where the user's own code called in."""
    f: types.FrameType | None = sys._getframe(depth)
    while f is not None:
        fn = f.f_code.co_filename
        if not _is_internal(fn):
            return SourceLoc(fn, f.f_lineno)
        f = f.f_back
    return None


# The location set by the innermost at_location block, and the frame that entered it.
_AT: contextvars.ContextVar[tuple[SourceLoc, types.FrameType] | None] = contextvars.ContextVar(
    "pypto_op_location", default=None
)


class at_location:
    """``with at_location(loc):`` ops that pypto's own code traces in the block go at ``loc``.

    User code called back from inside the block (a custom_vjp's ``fwd`` and ``bwd``, a function
    traced for the first time there) keeps its own lines: ``loc`` stands only for the frames at
    and outside the one that entered the block. ``loc=None`` changes nothing. Blocks nest; leaving
    one restores the location of the block around it.
    """

    __slots__ = ("_loc", "_token")

    def __init__(self, loc: SourceLoc | None) -> None:
        self._loc = loc
        self._token: contextvars.Token[tuple[SourceLoc, types.FrameType] | None] | None = None

    def __enter__(self) -> None:
        if self._loc is not None:
            self._token = _AT.set((self._loc, sys._getframe(1)))

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _AT.reset(self._token)
            self._token = None


def op_location() -> SourceLoc | None:
    """Where an op traced now belongs: the innermost user frame, unless pypto's own code traces
    it inside an :class:`at_location` block, which then gives the location.
    """
    at = _AT.get()
    f: types.FrameType | None = sys._getframe(1)
    while f is not None:
        if at is not None and f is at[1]:
            return at[0]
        fn = f.f_code.co_filename
        if not _is_internal(fn):
            return SourceLoc(fn, f.f_lineno)
        f = f.f_back
    return None


class PyptoError(Exception):
    """Base of every pypto error. ``op``, ``loc`` and ``hint`` are kept as attributes."""

    def __init__(
        self,
        message: str,
        *,
        op: str | None = None,
        loc: SourceLoc | None = None,
        hint: str | None = None,
    ) -> None:
        self.op = op
        # the user's line; inside an at_location block (lowering an op, replaying it for a
        # gradient) the op's own line
        self.loc = loc if loc is not None else op_location()
        self.hint = hint
        self.detail = message
        super().__init__(self._format())

    def _format(self) -> str:
        head = f"{self.op}: {self.detail}" if self.op else self.detail
        parts = [head]
        if self.loc is not None:
            parts.append(f"  at {self.loc} ({self.loc.file})")
        if self.hint:
            parts.append(f"  hint: {self.hint}")
        return "\n".join(parts)

    def stripped(self) -> Self:
        """This error with pypto's own frames cut from its traceback.

        A public entry point re-raises with ``raise e.stripped() from None``, so the user's
        traceback ends at their own line and the one pypto frame that was called.
        """
        return self.with_traceback(strip_internal_frames(self.__traceback__))


class ShapeError(PyptoError, ValueError):
    """Shapes that do not fit an op: broadcasting, matmul contraction, reshape sizes, axes."""


class BoundsError(ShapeError, IndexError):
    """An index or gather index outside a dimension."""


class ConversionError(ShapeError, TypeError):
    """A tensor of the wrong size for a Python conversion: ``bool()``, ``int()``, ``float()``,
    ``item()`` or an index of a tensor with more than one element, ``len()`` of a 0-d tensor.

    Also a TypeError, as Python's protocols (``len``, ``operator.index``) expect.
    """


class DTypeError(PyptoError, TypeError):
    """A dtype an op does not accept, or an unknown dtype."""


class TraceError(PyptoError):
    """A traced function did something that cannot be staged (e.g. Python ``if`` on a tracer)."""


class TileError(PyptoError):
    """A tile shape that does not fit a buffer or breaks an alignment rule."""


class SimulationError(PyptoError):
    """The simulated NPU found a fault: overflow, out-of-bounds, deadlock, race."""


class NumericsMismatch(PyptoError, AssertionError):
    """A result disagreed with the JAX reference beyond the tolerance table."""


def strip_internal_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without frames from pypto's own files (JAX-style traceback filtering)."""
    kept: list[types.TracebackType] = []
    while tb is not None:
        if not _is_internal(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    out: types.TracebackType | None = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out
