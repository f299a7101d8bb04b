"""Print → parse → print must be the identity on every graph the tests build."""

from __future__ import annotations

import numpy as np

from pypto.graph.ir import Func
from pypto.graph.parser import parse
from pypto.graph.printer import print_func


def assert_round_trip(f: Func) -> None:
    consts: dict[str, np.ndarray] = {}
    text = print_func(f, consts)
    back = parse(text, consts).verify()
    assert print_func(back) == text
