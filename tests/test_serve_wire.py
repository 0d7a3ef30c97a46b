"""The wire format: numpy arrays as plain msgpack maps, a dtype whitelist, never pickle, JSON for browsers."""

from __future__ import annotations

import json
import pickle

import msgpack
import numpy as np
import pytest

from vla.wire.codec import WireError, dumps_json, loads_json, pack, unpack


@pytest.mark.parametrize(
    "arr",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array([[1, 2], [3, 4]], dtype=np.uint8),
        np.array([True, False]),
        np.array(["bowl", "plate"], dtype=np.str_),
        np.zeros((0, 3), dtype=np.int32),
        np.array(3.5, dtype=np.float64),  # 0-d
        np.arange(6, dtype=">i4").reshape(2, 3),  # big-endian travels as little-endian
    ],
)
def test_array_round_trip(arr):
    back = unpack(pack({"x": arr}))["x"]
    assert isinstance(back, np.ndarray) and back.shape == arr.shape
    assert back.dtype == arr.dtype.newbyteorder("<") or back.dtype == arr.dtype
    assert back.tolist() == arr.tolist()
    back[...] = back  # decoded arrays are writable copies, not views of the message buffer


def test_layout_is_openpi_style_plain_map():
    raw = msgpack.unpackb(pack(np.array([1.0, 2.0], dtype=np.float32)), raw=False)
    assert raw == {
        "__ndarray__": True,
        "data": np.array([1.0, 2.0], dtype="<f4").tobytes(),
        "dtype": "<f4",
        "shape": [2],
    }


@pytest.mark.parametrize("dtype", ["O", "V8", "c16", "M8[s]", "f4,i4"])
def test_refused_dtypes_on_encode(dtype):
    arr = np.zeros(2, dtype=dtype)
    with pytest.raises(WireError, match="cannot be sent"):
        pack(arr)


@pytest.mark.parametrize("dtype", ["|O", "|V8", "<c16", "<M8[s]", "object", "float32", ">f4", "<U999999"])
def test_refused_dtypes_on_decode(dtype):
    msg = msgpack.packb({"__ndarray__": True, "data": b"\0" * 16, "dtype": dtype, "shape": [2]})
    with pytest.raises(WireError, match="not allowed"):
        unpack(msg)


def test_shape_and_size_must_agree():
    msg = msgpack.packb({"__ndarray__": True, "data": b"\0" * 15, "dtype": "<f4", "shape": [4]})
    with pytest.raises(WireError, match="needs 16 bytes, got 15"):
        unpack(msg)
    huge = msgpack.packb({"__ndarray__": True, "data": b"", "dtype": "<f8", "shape": [2**30, 2**30]})
    with pytest.raises(WireError, match="bytes"):
        unpack(huge)
    neg = msgpack.packb({"__ndarray__": True, "data": b"", "dtype": "<f8", "shape": [-1]})
    with pytest.raises(WireError, match="non-negative"):
        unpack(neg)


def test_pickle_is_refused_without_being_unpickled():
    class Boom:
        def __reduce__(self):  # would run on unpickling
            return (exec, ("raise SystemExit('unpickled!')",))

    for payload in (pickle.dumps(Boom(), protocol=p) for p in (2, 3, 4, 5)):
        with pytest.raises(WireError, match="pickle"):
            unpack(payload)


def test_ext_types_timestamps_and_non_string_keys_are_refused():
    with pytest.raises(WireError, match="extension"):
        unpack(msgpack.packb(msgpack.ExtType(7, b"abc")))
    with pytest.raises(WireError):
        unpack(msgpack.packb(msgpack.Timestamp(10)))
    with pytest.raises(WireError):
        unpack(msgpack.packb({1: "x"}))


def test_malformed_and_trailing_bytes():
    good = pack({"method": "health"})
    with pytest.raises(WireError, match="malformed"):
        unpack(good[:-1])
    with pytest.raises(WireError, match="extra bytes"):
        unpack(good + b"\x01")
    with pytest.raises(WireError, match="limit"):
        unpack(good, max_size=3)


def test_deep_nesting_is_refused():
    deep: object = 1
    for _ in range(200):
        deep = [deep]
    with pytest.raises(WireError, match="nested"):
        unpack(msgpack.packb(deep))


def test_json_arrays_bytes_and_non_finite():
    text = dumps_json({"a": np.array([1.5, np.nan]), "b": b"\x00\xff", "c": float("inf"), "d": np.int64(3)})
    d = json.loads(text)
    assert d == {"a": [1.5, None], "b": {"__base64__": "AP8="}, "c": None, "d": 3}
    with pytest.raises(WireError, match="NaN"):
        loads_json('{"x": NaN}')
    with pytest.raises(WireError, match="malformed JSON"):
        loads_json("{")
