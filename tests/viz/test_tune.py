"""The Tuner: every change recompiles and moves the read-outs; a bad setting shows its error and
keeps the last good view; tune_once is the pure function behind it; the knobs it turns
(double buffering, swizzling) change the schedule, not the results."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import pypto as pto
from pypto.viz.tune import Tuner, TuneSettings, tune_once

RNG = np.random.default_rng(7)
A = RNG.standard_normal((128, 256)).astype(np.float16)
B = RNG.standard_normal((256, 256)).astype(np.float16)
X = RNG.standard_normal((64, 512)).astype(np.float32)


def mm(x, w):
    return pto.relu(x @ w)


def ew(x):
    return pto.exp(x) * 2


@pytest.fixture(scope="module")
def tuner() -> Tuner:
    return pto.viz.tune(pto.jit(mm, machine="tiny"), A, B)


def test_starts_from_the_automatic_choice(tuner: Tuner) -> None:
    r = tuner.result
    assert r is not None and r.ok and tuner.error.value == ""
    assert tuner.cube_auto.value and tuner.vec_auto.value
    chosen = tuple(w.value for w in tuner.cube.values())
    assert chosen == r.tiles["cube"]  # the drop-downs show the tiles the compiler picked
    assert f"{r.cycles:,.0f}" in tuner.cycles.value
    assert f"{r.efficiency:.1%}" in tuner.efficiency.value
    assert tuner.image.value[:4] == b"\x89PNG"
    assert tuner.machine.value == "tiny" and tuner.clusters.value == 1
    assert tuner.cores.value.startswith("3 cores")


def test_a_change_recompiles_and_updates(tuner: Tuner) -> None:
    cycles, image = tuner.cycles.value, tuner.image.value
    tuner.double_buffer.value = False
    assert tuner.result is not None and not tuner.result.settings.double_buffer
    assert tuner.cycles.value != cycles and "vs the last good" in tuner.cycles.value
    assert tuner.image.value != image
    tuner.double_buffer.value = True
    assert tuner.cycles.value.split(" (")[0] == cycles.split(" (")[0]  # cached, same number


def test_clusters_make_a_custom_machine(tuner: Tuner) -> None:
    tuner.clusters.value = 2
    assert tuner.machine.value == "custom"
    assert tuner.result is not None and tuner.result.profile is not None
    assert tuner.result.profile.machine.clusters == 2
    assert tuner.cores.value.startswith("6 cores")
    tuner.machine.value = "tiny"  # a preset snaps the slider back
    assert tuner.clusters.value == 1 and tuner.result.profile.machine.name == "tiny"


def test_a_bad_tile_shows_the_error_and_keeps_the_last_good_view(tuner: Tuner) -> None:
    good = tuner.good
    cycles, eff, image = tuner.cycles.value, tuner.efficiency.value, tuner.image.value
    tuner.cube["k0"].value = 256  # two 128x256 f16 tiles overflow L0A's 64 KiB
    assert not tuner.cube_auto.value  # touching a tile leaves automatic mode
    assert tuner.result is not None and not tuner.result.ok
    assert "TileError" in tuner.error.value and "L0A needs 131072 bytes" in tuner.error.value
    assert "last good setting" in tuner.error.value
    assert (tuner.cycles.value, tuner.efficiency.value, tuner.image.value) == (cycles, eff, image)
    assert tuner.good is good
    tuner.cube["k0"].value = 128
    assert tuner.error.value == "" and tuner.result.ok


def test_vector_tile_slider() -> None:
    t = pto.viz.tune(ew, X, machine="tiny")
    assert all(not w.disabled for w in (t.vec_rows, t.vec_cols))
    assert all(w.disabled for w in t.cube.values())  # no matmul: nothing to set
    before = t.cycles.value
    t.vec_rows.value = 1
    assert t.result is not None and t.result.settings.vec == (1, t.vec_cols.value)
    assert t.cycles.value != before
    t.vec_rows.value = 64  # a [64, 512] f32 tile with its buffers overflows UB
    assert "needs" in t.error.value and "UB" in t.error.value
    assert str(t).startswith("Tuner: tiny, vec [64, 512]")


def test_tune_once_is_pure() -> None:
    s = TuneSettings(machine="tiny", vec=(16, 512))
    r1, r2 = tune_once(ew, (X,), s), tune_once(pto.jit(ew), (X,), s)
    assert r1.ok and r1.cycles == r2.cycles and r1.tiles == {"vec": (16, 512)}
    assert r1.profile is not None and r1.profile.outputs is None  # timing only
    assert "cycles" in r1.summary() and "tiny, vec [16, 512]" in r1.summary()
    bad = tune_once(ew, (X,), TuneSettings(machine="tiny", vec=(64, 512)))
    assert not bad.ok and bad.error is not None and bad.error.startswith("TileError")
    assert np.isnan(bad.cycles) and bad.error in bad.summary()


def test_settings_map_to_jit_options() -> None:
    s = TuneSettings(machine="ascend910b", clusters=3, double_buffer=False, swizzle=4)
    assert s.tile() == dict(
        vec=None, cube=None, double_buffer=False, swizzle=4, read_ahead=True, split_k=None
    )
    m = s.target()
    assert (m.clusters, m.n_aiv, m.name) == (3, 6, "ascend910b-3c")
    assert str(s) == (
        "ascend910b with 3 clusters, vec auto, cube auto, double buffering off, swizzle 4"
    )
    assert str(replace(s, read_ahead=False)).endswith("swizzle 4, no read-ahead")
    assert str(replace(s, split_k=3)).endswith("swizzle 4, split K 3")
    assert replace(s, split_k=3).tile()["split_k"] == 3


def test_knobs_keep_the_numbers_and_change_the_schedule() -> None:
    a = RNG.standard_normal((512, 128)).astype(np.float16)
    b = RNG.standard_normal((128, 512)).astype(np.float16)
    cube = ([128, 128], [128, 128], [128, 128])  # a 4 x 4 grid of output tiles
    machine = pto.npu.machine("tiny").replace(clusters=4)
    want = None
    runs = {}
    for knobs in ({}, {"swizzle": 1}, {"swizzle": 4}, {"double_buffer": False}):
        f = pto.jit(mm, machine=machine, tile=dict(cube=cube, **knobs))
        prof = f.profile(a, b)
        out = prof.outputs[0].numpy()
        want = out if want is None else want
        np.testing.assert_array_equal(out, want)
        stores = [w for w in prof.windows("out") if w.event.core == "aiv0"]
        runs[str(knobs)] = ([(w.row, w.col) for w in stores], prof.cycles, f.lower(a, b))
    order = {k: v[0] for k, v in runs.items()}
    # cluster 0 runs tiles 0, 4, 8, 12: a column of tiles row-major, a 2 x 2 block in bands of
    # two rows (the default on four clusters), the first tile of each column in bands of four
    assert [(r // 128, c // 128) for r, c in order["{'swizzle': 1}"]] == [
        (0, 0), (1, 0), (2, 0), (3, 0)
    ]  # fmt: skip
    assert [(r // 128, c // 128) for r, c in order["{}"]] == [(0, 0), (0, 2), (2, 0), (2, 2)]
    assert [(r // 128, c // 128) for r, c in order["{'swizzle': 4}"]] == [
        (0, 0), (0, 1), (0, 2), (0, 3)
    ]  # fmt: skip
    assert order["{'double_buffer': False}"] == order["{}"]
    single = str(runs["{'double_buffer': False}"][2].block_ir)
    assert " x2 by " in str(runs["{}"][2].block_ir) and " x2 by " not in single
    assert runs["{'double_buffer': False}"][1] > runs["{}"][1]  # no overlap: slower


def test_bad_knob_values() -> None:
    with pytest.raises(pto.TileError, match="swizzle=0"):
        pto.jit(ew, tile=dict(swizzle=0))(X)
    with pytest.raises(pto.TileError, match="double_buffer='no'"):
        pto.jit(ew, tile=dict(double_buffer="no"))(X)
    with pytest.raises(pto.TileError, match="read_ahead=1 is not True or False"):
        pto.jit(ew, tile=dict(read_ahead=1))(X)
