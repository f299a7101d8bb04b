"""The element types of pypto and their promotion rules.

Promotion follows JAX's lattice restricted to these six types (with 64-bit types disabled):
``bool_ < int8 < int32 < {float16, bfloat16} < float32``, where any integer joins any float
to that float and ``float16`` joins ``bfloat16`` to ``float32``. Python scalars are *weak*:
they take the dtype of the tensor they meet when their kind (bool < int < float) allows it.

>>> import pypto as pto
>>> pto.promote_types(pto.int8, pto.float16)
float16
>>> pto.result_type(pto.int32, 1.5)
float32
"""

from __future__ import annotations

import difflib
from typing import Any

import ml_dtypes
import numpy as np

from pypto.core.errors import DTypeError

__all__ = [
    "DType",
    "bfloat16",
    "bool_",
    "can_cast",
    "canonical_dtype",
    "dtype",
    "finfo",
    "float16",
    "float32",
    "from_numpy",
    "iinfo",
    "int8",
    "int32",
    "isdtype",
    "issubdtype",
    "promote_types",
    "result_type",
]

_BOOL, _INT, _FLOAT = 0, 1, 2


class DType:
    """One element type: ``name``, ``short`` (as printed in IR), ``itemsize`` and ``np`` dtype."""

    __slots__ = ("_kind", "bits", "itemsize", "name", "np", "short")

    def __init__(self, name: str, short: str, np_dtype: Any, kind: int) -> None:
        self.name = name
        self.short = short
        self.np: np.dtype[Any] = np.dtype(np_dtype)
        self.itemsize: int = self.np.itemsize
        self.bits: int = self.itemsize * 8
        self._kind = kind

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype, so numpy takes a pypto dtype where it takes one, as it takes
        ``jnp.float16``: ``np.zeros(2, pto.bfloat16)``, ``a.astype(pto.int8)``.

        >>> import numpy as np, pypto as pto
        >>> np.zeros(2).astype(pto.bfloat16).dtype, np.dtype(pto.int8)
        (dtype(bfloat16), dtype('int8'))
        """
        return self.np

    @property
    def is_floating(self) -> bool:
        return self._kind == _FLOAT

    @property
    def is_integer(self) -> bool:
        return self._kind == _INT

    @property
    def is_bool(self) -> bool:
        return self._kind == _BOOL

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        # dtypes are singletons; pickling refers to the module attribute.
        return self.name if self.name != "bool" else "bool_"


float32 = DType("float32", "f32", np.float32, _FLOAT)
float16 = DType("float16", "f16", np.float16, _FLOAT)
bfloat16 = DType("bfloat16", "bf16", ml_dtypes.bfloat16, _FLOAT)
int32 = DType("int32", "i32", np.int32, _INT)
int8 = DType("int8", "i8", np.int8, _INT)
bool_ = DType("bool", "bool", np.bool_, _BOOL)

ALL: tuple[DType, ...] = (float32, float16, bfloat16, int32, int8, bool_)
FLOATS: tuple[DType, ...] = (float32, float16, bfloat16)

_BY_NAME: dict[str, DType] = {}
for _d in ALL:
    _BY_NAME[_d.name] = _d
    _BY_NAME[_d.short] = _d
_BY_NAME["bool_"] = bool_
_BY_NP: dict[np.dtype[Any], DType] = {d.np: d for d in ALL}
# Like JAX with 64-bit types disabled: wide numpy types narrow to the defaults.
_BY_NP[np.dtype(np.float64)] = float32
_BY_NP[np.dtype(np.int64)] = int32
_DEFAULT = {_BOOL: bool_, _INT: int32, _FLOAT: float32}


def dtype(x: Any, *, op: str | None = None) -> DType:
    """The pypto dtype named by ``x``: a DType, a name (``"float16"``, ``"f16"``) or a numpy dtype.

    ``op`` names the operation asking, for the error message of an unknown dtype.

    >>> dtype("bf16")
    bfloat16
    """
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        d = _BY_NAME.get(x)
        if d is None:
            raise DTypeError(f"unknown dtype name {x!r}", op=op, hint=_names_hint(x))
        return d
    if x is bool:
        return bool_
    if x is int:
        return int32
    if x is float:
        return float32
    try:
        npd = np.dtype(x)
    except (TypeError, ValueError):  # (numpy raises either, by what it was given)
        shown = repr(x) if len(repr(x)) <= 60 and "\n" not in repr(x) else f"a {type(x).__name__}"
        raise DTypeError(f"{shown} is not a dtype", op=op, hint=_names_hint()) from None
    return from_numpy(npd, op=op)


def _names_hint(name: str | None = None) -> str:
    names = [d.name for d in ALL]
    # 64-bit names narrow to their 32-bit kin, as JAX does without 64-bit mode.
    close = difflib.get_close_matches(name.replace("64", "32"), [*_BY_NAME], n=1) if name else []
    guess = f"did you mean {_BY_NAME[close[0]].name!r}? " if close else ""
    return f"{guess}use one of {', '.join(names)}"


def from_numpy(npd: np.dtype[Any], *, op: str | None = None) -> DType:
    """The pypto dtype of a numpy dtype (float64 → float32 and int64 → int32, as JAX does)."""
    d = _BY_NP.get(npd)
    if d is None:
        raise DTypeError(
            f"numpy dtype {npd} is not supported",
            op=op,
            hint="convert the array to one of " + ", ".join(x.name for x in ALL),
        )
    return d


canonical_dtype = from_numpy


def _join(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if a._kind != b._kind:
        return a if a._kind > b._kind else b
    if a._kind == _INT:
        return a if a.bits >= b.bits else b
    # float16 ⊔ bfloat16 = float32; float32 absorbs both.
    return float32


def promote_types(*dtypes: DType) -> DType:
    """The join of strong dtypes in the promotion lattice."""
    out = dtypes[0]
    for d in dtypes[1:]:
        out = _join(out, d)
    return out


def weak_kind(x: object) -> int | None:
    """The kind of a weak Python scalar (bool < int < float), or None for anything else."""
    t = type(x)
    if t is bool:
        return _BOOL
    if t is int:
        return _INT
    if t is float:
        return _FLOAT
    return None


def promote_with_weak(strong: DType | None, weak: int) -> DType:
    """The dtype of ``strong`` combined with a weak scalar of kind ``weak``."""
    if strong is None:
        return _DEFAULT[weak]
    if weak <= strong._kind:
        return strong
    return _DEFAULT[weak]


def result_type(*args: Any) -> DType:
    """The dtype an elementwise op gives for these operands (tensors, arrays, dtypes or scalars).

    >>> result_type(bool_, 2)
    int32
    """
    strong: DType | None = None
    weak = -1
    for a in args:
        k = weak_kind(a)
        if k is not None:
            weak = max(weak, k)
            continue
        d = a if isinstance(a, DType) else _dtype_of(a)
        strong = d if strong is None else _join(strong, d)
    if weak < 0:
        assert strong is not None
        return strong
    return promote_with_weak(strong, weak)


def _dtype_of(a: Any) -> DType:
    d = getattr(a, "dtype", None)
    if isinstance(d, DType):
        return d
    if d is not None:
        return from_numpy(np.dtype(d))
    return dtype(a)


def _of(x: Any, op: str) -> DType:
    """The dtype of ``x``: a dtype (or its name) or anything with a ``.dtype``."""
    d = getattr(x, "dtype", None)
    return dtype(x if d is None or isinstance(x, type) else d, op=op)


def finfo(x: Any) -> Any:
    """The machine limits of a float dtype (numpy's ``finfo``; ml_dtypes' for bfloat16), as
    ``jnp.finfo``: ``x`` is a dtype, its name, or a tensor or array of it.

    >>> finfo("bfloat16").eps, float(finfo(float16).max)
    (0.0078125, 65504.0)
    """
    d = _of(x, "finfo")
    if not d.is_floating:
        raise DTypeError(f"finfo needs a float dtype, got {d}", op="finfo", hint="use iinfo")
    return ml_dtypes.finfo(d.np) if d is bfloat16 else np.finfo(d.np)


def iinfo(x: Any) -> Any:
    """The limits of an integer dtype (numpy's ``iinfo``), as ``jnp.iinfo``.

    >>> int(iinfo(int8).min), int(iinfo("int32").max)
    (-128, 2147483647)
    """
    d = _of(x, "iinfo")
    if not d.is_integer:
        raise DTypeError(f"iinfo needs an integer dtype, got {d}", op="iinfo", hint="use finfo")
    return np.iinfo(d.np)


# numpy's abstract scalar types each dtype belongs to (numpy does not count ml_dtypes'
# bfloat16 as np.floating; JAX does, and so does pypto)
_ABSTRACT = {
    _BOOL: (np.bool_, np.generic),
    _INT: (np.signedinteger, np.integer, np.number, np.generic),
    _FLOAT: (np.floating, np.inexact, np.number, np.generic),
}
_ALL_ABSTRACT = {
    *(t for ts in _ABSTRACT.values() for t in ts),
    np.unsignedinteger,
    np.complexfloating,
}


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """Whether ``arg1`` is ``arg2`` or one of its kinds, as ``jnp.issubdtype``: ``arg2`` a
    dtype or numpy's abstract types (``np.floating``, ``np.integer``, ``np.number``, ...).

    >>> import numpy as np, pypto as pto
    >>> pto.issubdtype(pto.bfloat16, np.floating), pto.issubdtype(pto.int8, np.floating)
    (True, False)
    """
    d = dtype(arg1, op="issubdtype")
    if arg2 in _ALL_ABSTRACT:
        return arg2 in _ABSTRACT[d._kind]
    return dtype(arg2, op="issubdtype") is d


_KINDS = {
    "bool": (_BOOL,),
    "signed integer": (_INT,),
    "unsigned integer": (),
    "integral": (_INT,),
    "real floating": (_FLOAT,),
    "complex floating": (),
    "numeric": (_INT, _FLOAT),
}


def isdtype(d: Any, kind: Any) -> bool:
    """Whether ``d`` is of ``kind``, as the array API's ``isdtype``: a dtype, one of
    ``"bool"``, ``"signed integer"``, ``"unsigned integer"``, ``"integral"``,
    ``"real floating"``, ``"complex floating"``, ``"numeric"``, or a tuple of these.

    >>> import pypto as pto
    >>> pto.isdtype(pto.float16, ("integral", "real floating"))
    True
    """
    dd = dtype(d, op="isdtype")
    if isinstance(kind, tuple):
        return any(isdtype(dd, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise DTypeError(
                f"unknown kind {kind!r}",
                op="isdtype",
                hint="one of " + ", ".join(repr(k) for k in _KINDS),
            )
        return dd._kind in _KINDS[kind]
    return dtype(kind, op="isdtype") is dd


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """Whether ``from_`` (a dtype) converts to ``to`` under numpy's ``casting`` rule, as
    ``jnp.can_cast``.

    >>> import pypto as pto
    >>> pto.can_cast(pto.int8, pto.float16), pto.can_cast(pto.float32, pto.float16)
    (True, False)
    """
    a, b = dtype(from_, op="can_cast"), dtype(to, op="can_cast")
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise DTypeError(f"casting={casting!r} is not one of numpy's rules", op="can_cast")
    return bool(np.can_cast(a.np, b.np, casting))  # type: ignore[arg-type]
