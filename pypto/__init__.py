"""pypto: write it like numpy, debug it eagerly, compile it for a tile-based NPU.

>>> import pypto as pto
>>> x = pto.tensor([1.0, 2.0, 3.0])
>>> (pto.exp(x) * 2).dtype
float32
"""

from pypto import block, dtypes, isa, npu, tile
from pypto.compiler import jit, make_graph
from pypto.core.errors import (
    BoundsError,
    ConversionError,
    DTypeError,
    NumericsMismatch,
    PyptoError,
    ShapeError,
    SimulationError,
    TileError,
    TraceError,
)
from pypto.dtypes import (
    DType,
    bfloat16,
    bool_,
    float16,
    float32,
    int8,
    int32,
    promote_types,
    result_type,
)
from pypto.eager import (
    Tensor,
    arange,
    full,
    ones,
    ones_like,
    random,
    tensor,
    zeros,
    zeros_like,
)
from pypto.graph.autodiff import grad, value_and_grad, vjp
from pypto.graph.custom_vjp import custom_vjp
from pypto.ops import (
    abs,
    add,
    argmax,
    broadcast_to,
    cast,
    clip,
    concat,
    cos,
    div,
    equal,
    exp,
    expand_dims,
    gelu,
    greater,
    greater_equal,
    layer_norm,
    less,
    less_equal,
    log,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    neg,
    not_equal,
    pow,
    reciprocal,
    relu,
    reshape,
    rms_norm,
    rsqrt,
    scaled_dot_product_attention,
    sigmoid,
    silu,
    sin,
    softmax,
    split,
    sqrt,
    squeeze,
    stop_gradient,
    sub,
    sum,
    take,
    tanh,
    transpose,
    where,
)
from pypto.reference import check, to_jax
from pypto.tile.config import (
    hint,
    reset_tile_shapes,
    set_cube_tile_shapes,
    set_vec_tile_shapes,
    tile_shapes,
)
from pypto.tile.language import ShapeDtype, kernel

__version__ = "0.1.0"


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext pypto``: registers the ``%%pypto`` cell magic."""
    from pypto.jupyter import load_ipython_extension as load

    load(ipython)


def __getattr__(name: str) -> object:
    # The views (matplotlib, graphviz, ipywidgets) load on first use, not on import.
    if name == "viz":
        import importlib

        return importlib.import_module("pypto.viz")
    raise AttributeError(f"module 'pypto' has no attribute {name!r}")


__all__ = [
    "BoundsError",
    "ConversionError",
    "DType",
    "DTypeError",
    "NumericsMismatch",
    "PyptoError",
    "ShapeDtype",
    "ShapeError",
    "SimulationError",
    "Tensor",
    "TileError",
    "TraceError",
    "abs",
    "add",
    "arange",
    "argmax",
    "bfloat16",
    "block",
    "bool_",
    "broadcast_to",
    "cast",
    "check",
    "clip",
    "concat",
    "cos",
    "custom_vjp",
    "div",
    "dtypes",
    "equal",
    "exp",
    "expand_dims",
    "float16",
    "float32",
    "full",
    "gelu",
    "grad",
    "greater",
    "greater_equal",
    "hint",
    "int8",
    "int32",
    "isa",
    "jit",
    "kernel",
    "layer_norm",
    "less",
    "less_equal",
    "log",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "make_graph",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mul",
    "neg",
    "not_equal",
    "npu",
    "ones",
    "ones_like",
    "pow",
    "promote_types",
    "random",
    "reciprocal",
    "relu",
    "reset_tile_shapes",
    "reshape",
    "result_type",
    "rms_norm",
    "rsqrt",
    "scaled_dot_product_attention",
    "set_cube_tile_shapes",
    "set_vec_tile_shapes",
    "sigmoid",
    "silu",
    "sin",
    "softmax",
    "split",
    "sqrt",
    "squeeze",
    "stop_gradient",
    "sub",
    "sum",
    "take",
    "tanh",
    "tensor",
    "tile",
    "tile_shapes",
    "to_jax",
    "transpose",
    "value_and_grad",
    "vjp",
    "where",
    "zeros",
    "zeros_like",
]
