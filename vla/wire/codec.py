"""The wire format: msgpack with numpy arrays as plain maps (never pickle), and JSON for browsers.

A numpy array travels as the map ``{"__ndarray__": true, "data": <bytes>, "dtype": "<f4", "shape":
[h, w]}`` (openpi's layout). Only a whitelist of dtypes crosses the wire -- bool, (u)int8..64,
float16/32/64 and fixed-width unicode -- little-endian; object, void (structured), complex and
datetime dtypes are refused, so decoding a message can never build an arbitrary Python object.
msgpack extension types (including timestamps) are refused too, and so is anything that looks
like a pickle. Numpy scalars are sent as Python numbers.

Before a message is built at all, :func:`scan_msgpack` walks its bytes (without creating objects)
and refuses one of more than ``max_objects`` values or nested deeper than ``MAX_DEPTH``, so one
legal-sized message of millions of tiny objects costs a bounded amount of work. Every string --
map keys, values and the entries of unicode arrays -- must be valid Unicode: code points past
U+10FFFF and lone surrogates are refused here, so they never reach a session (where they would
break every later reply that carries them).

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
MAX_OBJECTS = 10_000  # values (maps, lists, strings, numbers, ...) in one message (an observation: ~100)


class WireError(ValueError):
    """A message that cannot be decoded or does not have the expected form."""


# ----------------------------------------------------------------------------- msgpack
def _plain(obj: Any) -> Any:
    """What msgpack cannot pack by itself, other than arrays: numpy scalars and tuples/sets."""
    if isinstance(obj, np.generic):
        if obj.dtype.kind not in "biufU":
            raise WireError(f"numpy scalars of dtype {obj.dtype} cannot be sent")
        return obj.item()
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    raise WireError(f"values of type {type(obj).__name__} cannot be sent (plain data and numpy arrays only)")


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
    return _plain(obj)


def pack(message: Any) -> bytes:
    """Encode a message (dicts, lists, str, bytes, numbers, bool, None, numpy arrays) as msgpack."""
    return _packb(message, _encode_default)


def _packb(message: Any, default) -> bytes:
    try:
        return msgpack.packb(message, default=default, use_bin_type=True)
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


def _type_table() -> list[tuple[int, int]]:
    """What each msgpack type byte starts: ``(kind, arg)`` with kind 0 a value of ``arg`` more
    bytes, 1 a container of ``arg`` entries (a map counts key and value), 2 a string or binary whose
    length takes ``arg`` bytes, 3 an array (``arg`` = 2 or 4 length bytes), 4 a map (likewise), 5 an
    extension type, 6 no msgpack type."""
    t = [(6, 0)] * 256
    for b in range(0x00, 0x80):
        t[b] = (0, 0)  # positive fixint
    for b in range(0xE0, 0x100):
        t[b] = (0, 0)  # negative fixint
    for b in range(0x80, 0x90):
        t[b] = (1, 2 * (b & 0x0F))  # fixmap
    for b in range(0x90, 0xA0):
        t[b] = (1, b & 0x0F)  # fixarray
    for b in range(0xA0, 0xC0):
        t[b] = (0, b & 0x1F)  # fixstr
    fixed = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
    fixed.update({0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8})
    for b, n in fixed.items():
        t[b] = (0, n)
    for b, n in {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}.items():
        t[b] = (2, n)  # bin8/16/32, str8/16/32
    t[0xDC], t[0xDD], t[0xDE], t[0xDF] = (3, 2), (3, 4), (4, 2), (4, 4)
    for b in (0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
        t[b] = (5, 0)
    return t


_TYPES = _type_table()


def scan_msgpack(data: bytes, max_objects: int = MAX_OBJECTS, max_depth: int = MAX_DEPTH) -> int:
    """Walk one msgpack message without building it: the number of values it holds, or
    :class:`WireError` for more than ``max_objects`` values, nesting deeper than ``max_depth``,
    extension types, truncation or trailing bytes. Strings and binaries are skipped by their
    length, so the cost is one step per value, at most ``max_objects`` steps."""
    types, end = _TYPES, len(data)
    n = i = 0
    left = [1]  # values still to read at each open level (the top level holds one)
    while left:
        if not left[-1]:
            left.pop()
            continue
        left[-1] -= 1
        n += 1
        if n > max_objects:
            raise WireError(f"message holds more than {max_objects} values (maps, lists, strings, numbers)")
        if i >= end:
            raise WireError("malformed msgpack: the message is truncated")
        kind, arg = types[data[i]]
        i += 1
        if kind == 0:
            i += arg
            continue
        if kind == 1:
            count = arg
        elif kind == 2:
            i += arg + int.from_bytes(data[i : i + arg], "big")
            count = 0
        elif kind == 3 or kind == 4:
            count = int.from_bytes(data[i : i + arg], "big") * (kind - 2)
            i += arg
        elif kind == 5:
            raise WireError(f"msgpack extension types are not accepted (type byte 0x{data[i - 1]:02x})")
        else:
            raise WireError(f"malformed msgpack: byte 0x{data[i - 1]:02x} is not a msgpack type")
        if count:
            if len(left) > max_depth:
                raise WireError(f"message nested deeper than {max_depth} levels")
            left.append(count)
    if i > end:
        raise WireError("malformed msgpack: the message is truncated")
    if i != end:
        raise WireError("malformed msgpack: extra bytes after the message")
    return n


def unpack(data: bytes, max_size: int | None = None, max_objects: int = MAX_OBJECTS) -> Any:
    """Decode one msgpack message; anything malformed raises :class:`WireError`."""
    return _unpack_checked(data, max_size, max_objects, _object_hook)


def _unpack_checked(data: bytes, max_size: int | None, max_objects: int, object_hook) -> Any:
    """The rules every binary message meets, whatever its array encoding (``object_hook``): bytes,
    under ``max_size``, no pickle, at most ``max_objects`` values, well-formed, plain data."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"a binary message must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if max_size is not None and len(data) > max_size:
        raise WireError(f"message of {len(data)} bytes exceeds the limit of {max_size} bytes")
    if looks_like_pickle(data):
        raise WireError("pickle payloads are refused (this server never unpickles); send msgpack")
    scan_msgpack(data, max_objects)
    try:
        msg = msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            object_hook=object_hook,
            ext_hook=_ext_hook,
            timestamp=0,
            use_list=True,
        )
    except WireError:
        raise
    except msgpack.ExtraData:
        raise WireError("malformed msgpack: extra bytes after the message") from None
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException, RecursionError) as exc:
        raise WireError(f"malformed msgpack: {type(exc).__name__}: {exc}") from None
    check_plain_tree(msg)
    return msg


def check_text(s: str) -> None:
    """``WireError`` unless ``s`` is valid Unicode (no lone surrogates; Python strings cannot hold
    code points past U+10FFFF, numpy's unicode arrays can: see :func:`check_unicode_array`)."""
    if s.isascii():
        return
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WireError(f"string {s[:40]!r} is not valid Unicode: {exc.reason} at position {exc.start}") from None


def check_unicode_array(arr: np.ndarray) -> None:
    """``WireError`` unless every code point of a unicode array is a Unicode scalar value (at most
    U+10FFFF, not a surrogate)."""
    if arr.dtype.kind != "U" or arr.size == 0:
        return
    cp = np.ascontiguousarray(arr).view(np.uint32)
    bad = (cp > 0x10FFFF) | ((cp >= 0xD800) & (cp <= 0xDFFF))
    if bad.any():
        first = int(cp[bad].flat[0])
        raise WireError(
            f"unicode array holds code point U+{first:X}, which is not a Unicode character "
            "(past U+10FFFF or a lone surrogate)"
        )


def check_plain_tree(obj: Any, depth: int = 0) -> None:
    """``WireError`` unless ``obj`` is plain data: maps with string keys, lists, str, bytes, numbers,
    bool, None and numpy arrays of allowed dtypes, nested at most ``MAX_DEPTH`` deep, every string
    (keys, values, unicode array entries) valid Unicode."""
    if depth > MAX_DEPTH:
        raise WireError(f"message nested deeper than {MAX_DEPTH} levels")
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):
                raise WireError(f"map keys must be strings, got {type(k).__name__}")
            check_text(k)
            check_plain_tree(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            check_plain_tree(v, depth + 1)
    elif isinstance(obj, str):
        check_text(obj)
    elif isinstance(obj, np.ndarray):
        check_unicode_array(obj)
    elif obj is None or isinstance(obj, (bytes, bool, int, float)):
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


def loads_json(text: str | bytes, max_size: int | None = None, max_objects: int = MAX_OBJECTS) -> Any:
    """Decode one JSON message (NaN / Infinity literals are refused). A message whose separators
    and brackets could hold more than ``max_objects`` values is refused before it is parsed."""
    if max_size is not None and len(text) > max_size:
        raise WireError(f"message of {len(text)} bytes exceeds the limit of {max_size} bytes")
    sep = (b",", b"[", b"{") if isinstance(text, bytes) else (",", "[", "{")
    if sum(text.count(c) for c in sep) >= max_objects:
        raise WireError(f"message holds more than {max_objects} values (counting its separators and brackets)")
    try:
        msg = json.loads(text, parse_constant=_reject_constant)
    except WireError:
        raise
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise WireError(f"malformed JSON: {exc}") from None
    check_plain_tree(msg)
    return msg


# ----------------------------------------------------------------------------- openpi's msgpack-numpy
# openpi's clients and servers (the openpi-client package) write an array as a map whose keys are
# msgpack *binary* strings: {b"__ndarray__": True, b"data": <bytes>, b"dtype": "<f4", b"shape": [..]},
# and a numpy scalar as {b"__npgeneric__": True, b"data": <number>, b"dtype": "<f4"}. The same
# whitelist of dtypes and the same limits apply; no other binary keys are accepted.
_OPENPI_ARRAY = {b"__ndarray__", b"data", b"dtype", b"shape"}
_OPENPI_SCALAR = {b"__npgeneric__", b"data", b"dtype"}


def _openpi_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr = obj if obj.dtype.byteorder != ">" else obj.astype(obj.dtype.newbyteorder("<"))
        if not _DTYPE_RE.match(arr.dtype.str):
            raise WireError(f"arrays of dtype {arr.dtype} cannot be sent (only bool, int, uint, float and unicode)")
        return {b"__ndarray__": True, b"data": arr.tobytes(), b"dtype": arr.dtype.str, b"shape": list(arr.shape)}
    return _plain(obj)


def pack_openpi(message: Any) -> bytes:
    """Encode a message as openpi's msgpack-numpy does (arrays as maps with binary keys)."""
    return _packb(message, _openpi_default)


def _openpi_hook(d: dict) -> Any:
    if b"__ndarray__" in d:
        extra = set(d) - _OPENPI_ARRAY
        if extra:
            raise WireError(f"array map has unknown field(s) {sorted(map(repr, extra))}")
        return _array_from_map({k.decode(): v for k, v in d.items()})
    if b"__npgeneric__" in d:
        if set(d) != _OPENPI_SCALAR:
            raise WireError("a numpy scalar map has exactly __npgeneric__, data and dtype")
        dtype, value = d[b"dtype"], d[b"data"]
        if not isinstance(dtype, str) or not _DTYPE_RE.match(dtype) or isinstance(value, (dict, list, bytes)):
            raise WireError(f"numpy scalar of dtype {dtype!r} is not allowed")
        return np.dtype(dtype).type(value).item()
    return d


def unpack_openpi(data: bytes, max_size: int | None = None, max_objects: int = MAX_OBJECTS) -> Any:
    """Decode one message in openpi's msgpack-numpy encoding, under the same rules as :func:`unpack`."""
    return _unpack_checked(data, max_size, max_objects, _openpi_hook)
