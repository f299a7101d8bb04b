"""Golden-text tests of the tensor passes: input IR, pass, expected IR (FileCheck-style, exact)."""

from __future__ import annotations

import textwrap

import pytest

from pypto.core.passes import PassManager
from pypto.graph.parser import parse
from pypto.graph.passes import constant_fold, cse, dce, fuse, shifted_sums, simplify, unfuse


def run(passes: object, src: str) -> str:
    f = parse(textwrap.dedent(src)).verify()
    seq = passes if isinstance(passes, tuple) else (passes,)
    out, _ = PassManager(seq, verify=True).run(f)
    return str(out)


def golden(text: str) -> str:
    return textwrap.dedent(text).strip()


# the product is returned as well: the sum of its padded parts stays as it is
READ_ELSEWHERE = """
func @f(%g: f32[4,2], %b: f32[2,6]) -> (f32[6,3], f32[4,6]) {
  %0: f32[4,6] = matmul %g, %b
  %1: f32[4,3] = slice %0 [index=((0, 4, 1), (0, 3, 1))]
  %2: f32[4,3] = slice %0 [index=((0, 4, 1), (3, 6, 1))]
  %3: f32[6,3] = lax_pad %1 [config=((0, 2, 0), (0, 0, 0))]
  %4: f32[6,3] = lax_pad %2 [config=((2, 0, 0), (0, 0, 0))]
  %5: f32[6,3] = add %3, %4
  return %5, %0
}
"""


CASES = [
    (
        "simplify reads a one-element constant broadcast against a full-size operand as the "
        "scalar itself, and casts such a broadcast's one number",
        (simplify, dce),
        """
        func @f(%x: f16[4,3], %v: f16[3]) -> (f16[4,3], f16[4,3], f32[4,3]) {
          %0: f32[1,1] = reshape 2.0:f32 [shape=(1, 1)]
          %1: f32[4,3] = broadcast_to %0 [shape=(4, 3)]
          %2: f16[4,3] = cast %1 [dtype=f16]
          %3: f16[4,3] = mul %2, %x
          %4: f16[4,3] = add %v, %2
          %5: f16[4,3] = sub %x, %2
          %6: f16[4,3] = mul %3, %5
          return %6, %4, %1
        }
        """,
        """
        func @f(%x: f16[4,3], %v: f16[3]) -> (f16[4,3], f16[4,3], f32[4,3]) {
          %0: f32[1,1] = reshape 2.0:f32 [shape=(1, 1)]
          %1: f32[4,3] = broadcast_to %0 [shape=(4, 3)]
          %2: f16[4,3] = broadcast_to 2.0:f16 [shape=(4, 3)]
          %3: f16[4,3] = mul 2.0:f16, %x
          %4: f16[4,3] = add %v, %2
          %5: f16[4,3] = sub %x, 2.0:f16
          %6: f16[4,3] = mul %3, %5
          return %6, %4, %1
        }
        """,
    ),
    (
        "simplify turns relu's select into a maximum, and only relu's",
        (simplify, dce),
        """
        func @f(%x: f32[4], %g: f32[4]) -> (f32[4], f32[4]) {
          %0: bool[4] = less_equal %x, 0.0:f32
          %1: f32[4] = where %0, 0.0:f32, %x
          %2: f32[4] = where %0, 0.0:f32, %g
          return %1, %2
        }
        """,
        """
        func @f(%x: f32[4], %g: f32[4]) -> (f32[4], f32[4]) {
          %0: bool[4] = less_equal %x, 0.0:f32
          %1: f32[4] = maximum %x, 0.0:f32
          %2: f32[4] = where %0, 0.0:f32, %g
          return %1, %2
        }
        """,
    ),
    (
        "dce drops unused values",
        dce,
        """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0: f32[4] = exp %x
          %1: f32[4] = log %x
          %2: f32[4] = add %0, %1
          %3: f32[4] = neg %x
          return %3
        }
        """,
        """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0: f32[4] = neg %x
          return %0
        }
        """,
    ),
    (
        "cse merges equal equations and literals",
        cse,
        """
        func @f(%x: f32[4]) -> (f32[1], f32[]) {
          %0: f32[4] = mul %x, 2.0:f32
          %1: f32[4] = mul %x, 2.0:f32
          %2: f32[4] = add %0, %1
          %3: f32[1] = sum %2 [axes=(0,) keepdims=true]
          %4: f32[1] = sum %2 [axes=(0,) keepdims=true]
          %5: f32[] = sum %2 [axes=(0,) keepdims=false]
          %6: f32[1] = add %3, %4
          return %6, %5
        }
        """,
        """
        func @f(%x: f32[4]) -> (f32[1], f32[]) {
          %0: f32[4] = mul %x, 2.0:f32
          %1: f32[4] = add %0, %0
          %2: f32[1] = sum %1 [axes=(0,) keepdims=true]
          %3: f32[] = sum %1 [axes=(0,) keepdims=false]
          %4: f32[1] = add %2, %2
          return %4, %3
        }
        """,
    ),
    (
        "constant folding computes constant subgraphs",
        constant_fold,
        """
        func @f(%x: f32[3]) -> (f32[3]) {
          %c0: f32[3] = const [1., 2., 3.]
          %0: f32[3] = mul %c0, 2.0:f32
          %1: f32[] = add 1.0:f32, 2.0:f32
          %2: f32[3] = add %x, %0
          %3: f32[3] = mul %2, %1
          return %3
        }
        """,
        """
        func @f(%x: f32[3]) -> (f32[3]) {
          %c0: f32[3] = const [1., 2., 3.]
          %c1: f32[3] = const [2., 4., 6.]
          %0: f32[3] = add %x, %c1
          %1: f32[3] = mul %0, 3.0:f32
          return %1
        }
        """,
    ),
    (
        "simplify turns zero-paddings that tile one axis into a concatenation",
        (simplify, dce),
        """
        func @f(%a: f32[2,3], %b: f32[2,5]) -> (f32[2,8], f32[2,8], f32[2,8]) {
          %0: f32[2,8] = lax_pad %a [config=((0, 0, 0), (0, 5, 0))]
          %1: f32[2,8] = lax_pad %b [config=((0, 0, 0), (3, 0, 0))]
          %2: f32[2,8] = add %1, %0
          %3: f32[2,8] = lax_pad %a [config=((0, 0, 0), (5, 0, 0))]
          %4: f32[2,8] = add %1, %3
          %5: f32[2,7] = lax_pad %a [config=((0, 0, 0), (0, 4, 0))]
          %6: f32[2,7] = lax_pad %a [config=((0, 0, 0), (4, 0, 0))]
          %7: f32[2,8] = lax_pad %b [config=((0, 0, 0), (0, 3, 0))]
          %8: f32[2,8] = add %7, %3
          return %2, %4, %8
        }
        """,
        """
        func @f(%a: f32[2,3], %b: f32[2,5]) -> (f32[2,8], f32[2,8], f32[2,8]) {
          %0: f32[2,8] = lax_pad %b [config=((0, 0, 0), (3, 0, 0))]
          %1: f32[2,8] = concat %a, %b [axis=1]
          %2: f32[2,8] = lax_pad %a [config=((0, 0, 0), (5, 0, 0))]
          %3: f32[2,8] = add %0, %2
          %4: f32[2,8] = concat %b, %a [axis=1]
          return %1, %3, %4
        }
        """,
    ),
    (
        "simplify removes neutral elements",
        (simplify, dce),
        """
        func @f(%x: f32[4], %y: f32[2,4]) -> (f32[4], f32[2,4]) {
          %0: f32[4] = mul %x, 1.0:f32
          %1: f32[4] = add 0.0:f32, %0
          %2: f32[4] = div %1, 1.0:f32
          %3: f32[4] = sub %2, 0.0:f32
          %4: f32[2,4] = add %y, 0.0:f32
          %5: f32[2,4] = add %y, %x
          return %3, %5
        }
        """,
        """
        func @f(%x: f32[4], %y: f32[2,4]) -> (f32[4], f32[2,4]) {
          %0: f32[2,4] = add %y, %x
          return %x, %0
        }
        """,
    ),
    (
        "simplify folds transpose, reshape, broadcast, cast and negation chains",
        (simplify, dce),
        """
        func @f(%x: f32[2,3,4], %h: f16[5]) -> (f32[4,3,2], f32[6,4], f32[7,2,3,4], bf16[5], f32[2,3,4], f16[5]) {
          %0: f32[3,2,4] = transpose %x [perm=(1, 0, 2)]
          %1: f32[2,3,4] = transpose %0 [perm=(1, 0, 2)]
          %2: f32[4,2,3] = transpose %x [perm=(2, 0, 1)]
          %3: f32[4,3,2] = transpose %2 [perm=(0, 2, 1)]
          %4: f32[24] = reshape %x [shape=(24,)]
          %5: f32[6,4] = reshape %4 [shape=(6, 4)]
          %6: f32[1,2,3,4] = broadcast_to %x [shape=(1, 2, 3, 4)]
          %7: f32[7,2,3,4] = broadcast_to %6 [shape=(7, 2, 3, 4)]
          %8: f32[5] = cast %h [dtype=f32]
          %9: f16[5] = cast %8 [dtype=f16]
          %10: f16[5] = neg %h
          %11: f16[5] = neg %10
          %12: bf16[5] = cast %8 [dtype=bf16]
          %13: f32[2,3,4] = add %1, 1.0:f32
          %14: f16[5] = add %9, %11
          return %3, %5, %7, %12, %13, %14
        }
        """,
        """
        func @f(%x: f32[2,3,4], %h: f16[5]) -> (f32[4,3,2], f32[6,4], f32[7,2,3,4], bf16[5], f32[2,3,4], f16[5]) {
          %0: f32[4,3,2] = transpose %x [perm=(2, 1, 0)]
          %1: f32[6,4] = reshape %x [shape=(6, 4)]
          %2: f32[7,2,3,4] = broadcast_to %x [shape=(7, 2, 3, 4)]
          %3: bf16[5] = cast %h [dtype=bf16]
          %4: f32[2,3,4] = add %x, 1.0:f32
          %5: f16[5] = add %h, %h
          return %0, %1, %2, %3, %4, %5
        }
        """,
    ),
    (
        "a lossy cast chain is kept",
        simplify,
        """
        func @f(%x: f32[5]) -> (f32[5]) {
          %0: f16[5] = cast %x [dtype=f16]
          %1: f32[5] = cast %0 [dtype=f32]
          return %1
        }
        """,
        """
        func @f(%x: f32[5]) -> (f32[5]) {
          %0: f16[5] = cast %x [dtype=f16]
          %1: f32[5] = cast %0 [dtype=f32]
          return %1
        }
        """,
    ),
    (
        "fusion: elementwise epilogue of a matmul, reduction starts a kernel",
        fuse,
        """
        func @f(%x: f16[8,16], %w: f16[16,32], %b: f16[32]) -> (f16[8,32], f16[8]) {
          %0: f16[8,32] = matmul %x, %w
          %1: f16[8,32] = add %0, %b
          %2: f16[8,32] = tanh %1
          %3: f16[8] = sum %2 [axes=(1,) keepdims=false]
          %4: f16[8] = mul %3, 0.5:f16
          return %2, %4
        }
        """,
        """
        func @f(%x: f16[8,16], %w: f16[16,32], %b: f16[32]) -> (f16[8,32], f16[8]) {
          group @k0 matmul_add_tanh {
            %0: f16[8,32] = matmul %x, %w
            %1: f16[8,32] = add %0, %b
            %2: f16[8,32] = tanh %1
          }
          group @k1 sum_mul {
            %3: f16[8] = sum %2 [axes=(1,) keepdims=false]
            %4: f16[8] = mul %3, 0.5:f16
          }
          return %2, %4
        }
        """,
    ),
    (
        "fusion: composites are one kernel; a later op joins as epilogue; layout ops alone",
        fuse,
        """
        func @f(%x: f32[4,8]) -> (f32[8,4]) {
          group @softmax0 softmax {
            %0: f32[4,1] = max %x [axes=(1,) keepdims=true]
            %1: f32[4,8] = sub %x, %0
            %2: f32[4,8] = exp %1
            %3: f32[4,1] = sum %2 [axes=(1,) keepdims=true]
            %4: f32[4,8] = div %2, %3
          }
          %5: f32[4,8] = mul %4, 3.0:f32
          %6: f32[8,4] = transpose %5 [perm=(1, 0)]
          return %6
        }
        """,
        """
        func @f(%x: f32[4,8]) -> (f32[8,4]) {
          group @k0 softmax_mul {
            %0: f32[4,1] = max %x [axes=(1,) keepdims=true]
            %1: f32[4,8] = sub %x, %0
            %2: f32[4,8] = exp %1
            %3: f32[4,1] = sum %2 [axes=(1,) keepdims=true]
            %4: f32[4,8] = div %2, %3
            %5: f32[4,8] = mul %4, 3.0:f32
          }
          group @k1 transpose {
            %6: f32[8,4] = transpose %5 [perm=(1, 0)]
          }
          return %6
        }
        """,
    ),
    (
        "fusion: matmul, scale, softmax, matmul is one attention kernel",
        fuse,
        """
        func @f(%q: f32[8,4], %kt: f32[4,8], %v: f32[8,4]) -> (f32[8,4]) {
          %0: f32[8,8] = matmul %q, %kt
          %1: f32[8,8] = mul %0, 0.5:f32
          group @softmax0 softmax {
            %2: f32[8,1] = max %1 [axes=(1,) keepdims=true]
            %3: f32[8,8] = sub %1, %2
            %4: f32[8,8] = exp %3
            %5: f32[8,1] = sum %4 [axes=(1,) keepdims=true]
            %6: f32[8,8] = div %4, %5
          }
          %7: f32[8,4] = matmul %6, %v
          return %7
        }
        """,
        """
        func @f(%q: f32[8,4], %kt: f32[4,8], %v: f32[8,4]) -> (f32[8,4]) {
          group @k0 attention {
            %0: f32[8,8] = matmul %q, %kt
            %1: f32[8,8] = mul %0, 0.5:f32
            %2: f32[8,1] = max %1 [axes=(1,) keepdims=true]
            %3: f32[8,8] = sub %1, %2
            %4: f32[8,8] = exp %3
            %5: f32[8,1] = sum %4 [axes=(1,) keepdims=true]
            %6: f32[8,8] = div %4, %5
            %7: f32[8,4] = matmul %6, %v
          }
          return %7
        }
        """,
    ),
    (
        "fusion keeps kernels acyclic: an op joins the latest producer kernel only",
        fuse,
        """
        func @f(%x: f32[4,4], %y: f32[4,4]) -> (f32[4,4]) {
          %0: f32[4,4] = exp %x
          %1: f32[4,4] = transpose %0 [perm=(1, 0)]
          %2: f32[4,4] = add %1, %0
          return %2
        }
        """,
        """
        func @f(%x: f32[4,4], %y: f32[4,4]) -> (f32[4,4]) {
          group @k0 exp {
            %0: f32[4,4] = exp %x
          }
          group @k1 transpose {
            %1: f32[4,4] = transpose %0 [perm=(1, 0)]
          }
          group @k2 add {
            %2: f32[4,4] = add %1, %0
          }
          return %2
        }
        """,
    ),
    (
        "fusion: an epilogue op read only by later row kernels that load the product moves there",
        fuse,
        """
        func @f(%a: f32[8,4], %b: f32[4,8], %p: f32[8,8]) -> (f32[8,8]) {
          %0: f32[8,8] = matmul %a, %b
          %1: f32[8,8] = mul %0, %p
          %2: f32[8,1] = sum %1 [axes=(1,) keepdims=true]
          %3: f32[8,8] = sub %0, %2
          %4: f32[8,8] = mul %p, %3
          return %4
        }
        """,
        """
        func @f(%a: f32[8,4], %b: f32[4,8], %p: f32[8,8]) -> (f32[8,8]) {
          group @k0 matmul {
            %0: f32[8,8] = matmul %a, %b
          }
          group @k1 mul_sum {
            %1: f32[8,8] = mul %0, %p
            %2: f32[8,1] = sum %1 [axes=(1,) keepdims=true]
          }
          group @k2 sub_mul {
            %3: f32[8,8] = sub %0, %2
            %4: f32[8,8] = mul %p, %3
          }
          return %4
        }
        """,
    ),
    (
        "fusion: an epilogue stays when the product leaves the matmul only through it",
        fuse,
        """
        func @f(%a: f32[8,4], %b: f32[4,8], %p: f32[8,8]) -> (f32[8,8]) {
          %0: f32[8,8] = matmul %a, %b
          %1: f32[8,8] = mul %0, %p
          %2: f32[8,1] = sum %1 [axes=(1,) keepdims=true]
          %3: f32[8,8] = sub %p, %2
          return %3
        }
        """,
        """
        func @f(%a: f32[8,4], %b: f32[4,8], %p: f32[8,8]) -> (f32[8,8]) {
          group @k0 matmul_mul {
            %0: f32[8,8] = matmul %a, %b
            %1: f32[8,8] = mul %0, %p
          }
          group @k1 sum {
            %2: f32[8,1] = sum %1 [axes=(1,) keepdims=true]
          }
          group @k2 sub {
            %3: f32[8,8] = sub %p, %2
          }
          return %3
        }
        """,
    ),
    (
        "unfuse: every op its own kernel",
        unfuse,
        """
        func @f(%x: f32[4]) -> (f32[4]) {
          %0: f32[4] = exp %x
          %1: f32[4] = mul %0, 2.0:f32
          return %1
        }
        """,
        """
        func @f(%x: f32[4]) -> (f32[4]) {
          group @k0 exp {
            %0: f32[4] = exp %x
          }
          group @k1 mul {
            %1: f32[4] = mul %0, 2.0:f32
          }
          return %1
        }
        """,
    ),
    (
        "shifted_sums: a product's column parts padded down and summed -> one product over "
        "shifted rows of the padded left operand",
        (shifted_sums, dce),
        """
        func @f(%g: f32[4,2], %b: f32[2,6]) -> (f32[6,3]) {
          %0: f32[4,6] = matmul %g, %b
          %1: f32[4,3] = slice %0 [index=((0, 4, 1), (0, 3, 1))]
          %2: f32[4,3] = slice %0 [index=((0, 4, 1), (3, 6, 1))]
          %3: f32[6,3] = lax_pad %1 [config=((0, 2, 0), (0, 0, 0))]
          %4: f32[6,3] = lax_pad %2 [config=((2, 0, 0), (0, 0, 0))]
          %5: f32[6,3] = add %3, %4
          return %5
        }
        """,
        """
        func @f(%g: f32[4,2], %b: f32[2,6]) -> (f32[6,3]) {
          %0: f32[2,2,3] = reshape %b [shape=(2, 2, 3)]
          %1: f32[2,2,3] = transpose %0 [perm=(1, 0, 2)]
          %2: f32[4,3] = reshape %1 [shape=(4, 3)]
          %3: f32[8,2] = lax_pad %g [config=((2, 2, 0), (0, 0, 0))]
          %4: f32[6,2] = slice %3 [index=((2, 8, 1), (0, 2, 1))]
          %5: f32[6,2] = slice %3 [index=((0, 6, 1), (0, 2, 1))]
          %6: f32[6,4] = concat %4, %5 [axis=1]
          %7: f32[6,3] = matmul %6, %2
          return %7
        }
        """,
    ),
    (
        "shifted_sums leaves the sum alone when the product is read elsewhere too",
        (shifted_sums, dce),
        READ_ELSEWHERE,
        READ_ELSEWHERE,  # unchanged
    ),
]


@pytest.mark.parametrize(("what", "pass_", "src", "expected"), CASES, ids=[c[0] for c in CASES])
def test_pass_golden(what: str, pass_: object, src: str, expected: str) -> None:
    assert run(pass_, src) == golden(expected)


@pytest.mark.parametrize(("what", "pass_", "src", "expected"), CASES, ids=[c[0] for c in CASES])
def test_golden_text_round_trips(what: str, pass_: object, src: str, expected: str) -> None:
    for text in (golden(src), golden(expected)):
        assert str(parse(text).verify()) == text
