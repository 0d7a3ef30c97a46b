"""The wire format: msgpack with numpy arrays as plain maps (never pickle), and JSON for browsers.

A numpy array travels as the map ``{"__ndarray__": true, "data": <bytes>, "dtype": "<f4", "shape":
[h, w]}`` (openpi's layout). Only a whitelist of dtypes crosses the wire -- bool, (u)int8..64,
float16/32/64 and fixed-width unicode -- little-endian; object, void (structured), complex and
datetime dtypes are refused, so decoding a message can never build an arbitrary Python object.
msgpack extension types (including timestamps) are refused too, and so is anything that looks
like a pickle. Numpy scalars are sent as Python numbers.

JSON (text websocket frames; the live page) carries the same messages: arrays become nested lists,
``bytes`` become ``{"__base64__": "..."}``.

Every decoding error is a :class:`WireError` whose message says what was wrong.
"""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

import msgpack
import numpy as np

# little-endian (or byte-order-free) bool / int / uint / float, and fixed-width unicode
_DTYPE_RE = re.compile(r"^(\|b1|\|u1|\|i1|<u2|<i2|<u4|<i4|<u8|<i8|<f2|<f4|<f8|<U[0-9]{1,5})$")
MAX_NDIM = 8
MAX_DEPTH = 32  # nesting of maps and lists in one message


class WireError(ValueError):
    """A message that cannot be decoded or does not have the expected form."""


# ----------------------------------------------------------------------------- msgpack
def _encode_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr = obj
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        if not _DTYPE_RE.match(arr.dtype.str):
            raise WireError(f"arrays of dtype {arr.dtype} cannot be sent (only bool, int, uint, float and unicode)")
        return {
            "__ndarray__": True,
            "data": np.ascontiguousarray(arr).tobytes(),
            "dtype": arr.dtype.str,
            "shape": list(arr.shape),
        }
    if isinstance(obj, np.generic):
        if obj.dtype.kind not in "biufU":
            raise WireError(f"numpy scalars of dtype {obj.dtype} cannot be sent")
        return obj.item()
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    raise WireError(f"values of type {type(obj).__name__} cannot be sent (plain data and numpy arrays only)")


def pack(message: Any) -> bytes:
    """Encode a message (dicts, lists, str, bytes, numbers, bool, None, numpy arrays) as msgpack."""
    try:
        return msgpack.packb(message, default=_encode_default, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, WireError):
            raise
        raise WireError(f"cannot encode message: {exc}") from exc


def _array_from_map(d: dict) -> np.ndarray:
    data, dtype, shape = d.get("data"), d.get("dtype"), d.get("shape")
    extra = sorted(set(d) - {"__ndarray__", "data", "dtype", "shape"})
    if extra:
        raise WireError(f"array map has unknown field(s) {extra}")
    if not isinstance(data, bytes):
        raise WireError(f"array 'data' must be bytes, got {type(data).__name__}")
    if not isinstance(dtype, str) or not _DTYPE_RE.match(dtype):
        raise WireError(
            f"array dtype {dtype!r} is not allowed; allowed: little-endian bool, (u)int8-64, float16/32/64, unicode"
        )
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_NDIM
        or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**31 for s in shape)
    ):
        raise WireError(f"array shape must be a list of at most {MAX_NDIM} non-negative ints, got {shape!r}")
    dt = np.dtype(dtype)
    n = math.prod(shape)
    if n * dt.itemsize != len(data):
        raise WireError(f"array of shape {shape} and dtype {dtype} needs {n * dt.itemsize} bytes, got {len(data)}")
    return np.frombuffer(data, dtype=dt).reshape(shape).copy()


def _object_hook(d: dict) -> Any:
    if "__ndarray__" in d:
        return _array_from_map(d)
    return d


def _ext_hook(code: int, data: bytes) -> Any:
    raise WireError(f"msgpack extension types are not accepted (got ext type {code})")


def looks_like_pickle(data: bytes) -> bool:
    """A pickle stream of protocol 2-5 starts with PROTO (0x80) and the protocol number."""
    return len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5


def unpack(data: bytes, max_size: int | None = None) -> Any:
    """Decode one msgpack message; anything malformed raises :class:`WireError`."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"a binary message must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if max_size is not None and len(data) > max_size:
        raise WireError(f"message of {len(data)} bytes exceeds the limit of {max_size} bytes")
    if looks_like_pickle(data):
        raise WireError("pickle payloads are refused (this server never unpickles); send msgpack")
    try:
        msg = msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            object_hook=_object_hook,
            ext_hook=_ext_hook,
            timestamp=0,
            use_list=True,
        )
    except WireError:
        raise
    except msgpack.ExtraData:
        raise WireError("malformed msgpack: extra bytes after the message") from None
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
        raise WireError(f"malformed msgpack: {type(exc).__name__}: {exc}") from None
    check_plain_tree(msg)
    return msg


def check_plain_tree(obj: Any, depth: int = 0) -> None:
    """``WireError`` unless ``obj`` is plain data: maps with string keys, lists, str, bytes, numbers,
    bool, None and numpy arrays of allowed dtypes, nested at most ``MAX_DEPTH`` deep."""
    if depth > MAX_DEPTH:
        raise WireError(f"message nested deeper than {MAX_DEPTH} levels")
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):
                raise WireError(f"map keys must be strings, got {type(k).__name__}")
            check_plain_tree(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            check_plain_tree(v, depth + 1)
    elif obj is None or isinstance(obj, (str, bytes, bool, int, float, np.ndarray)):
        return
    else:
        raise WireError(f"values of type {type(obj).__name__} are not accepted")


# ----------------------------------------------------------------------------- JSON
def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f" and not np.isfinite(obj).all():
            out = obj.astype(object)
            out[~np.isfinite(obj)] = None
            return out.tolist()
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (bytes, bytearray)):
        return {"__base64__": base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    raise TypeError(f"values of type {type(obj).__name__} cannot be sent as JSON")


def _finite_floats(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_floats(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_floats(v) for v in obj]
    return obj


def dumps_json(message: Any) -> str:
    """Encode a message as JSON text (non-finite floats become null, so browsers can parse it)."""
    try:
        return json.dumps(_finite_floats(message), default=_json_default, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise WireError(f"cannot encode message as JSON: {exc}") from exc


def _reject_constant(name: str) -> Any:
    raise WireError(f"JSON constant {name} is not accepted")


def loads_json(text: str | bytes, max_size: int | None = None) -> Any:
    """Decode one JSON message (NaN / Infinity literals are refused)."""
    if max_size is not None and len(text) > max_size:
        raise WireError(f"message of {len(text)} bytes exceeds the limit of {max_size} bytes")
    try:
        msg = json.loads(text, parse_constant=_reject_constant)
    except WireError:
        raise
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise WireError(f"malformed JSON: {exc}") from None
    check_plain_tree(msg)
    return msg
