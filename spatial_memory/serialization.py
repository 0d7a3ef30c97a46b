"""One file format for the memory: a ``.npz`` of plain numeric arrays plus one JSON document.

No pickle anywhere: arrays are read with ``allow_pickle=False`` and object dtypes are refused, the
metadata is JSON stored as UTF-8 bytes. Anything unreadable raises ``ValueError`` naming the file
and what was wrong, never a crash deeper down.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

_META = "__meta__"


def write(path: str | Path, arrays: dict[str, np.ndarray], meta: dict) -> Path:
    """Write atomically (temporary file + rename) so a reader never sees half a file."""
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
    for k, v in arrays.items():
        if k == _META or not isinstance(v, np.ndarray) or v.dtype.hasobject:
            raise ValueError(f"cannot save array {k!r}: plain numeric numpy arrays only")
    payload = dict(arrays)
    payload[_META] = np.frombuffer(json.dumps(meta, allow_nan=False).encode("utf-8"), dtype=np.uint8)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **payload)
    os.replace(tmp, path)
    return path


def read(path: str | Path) -> tuple[dict[str, np.ndarray], dict]:
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            if _META not in names:
                raise ValueError("it has no metadata record")
            meta = json.loads(bytes(data[_META]).decode("utf-8"))
            arrays = {k: data[k] for k in names if k != _META}
    except FileNotFoundError:
        raise
    except (
        ValueError,
        OSError,
        EOFError,
        zipfile.BadZipFile,
        UnicodeDecodeError,
        json.JSONDecodeError,
        KeyError,
    ) as exc:
        raise ValueError(f"{path} is not a readable spatial memory file: {exc}") from exc
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: metadata is not a JSON object")
    return arrays, meta
