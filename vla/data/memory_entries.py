"""The kinds of value a memory entry holds (``MemoryInputs.entries()``), as both memory caches store them.

``array`` (a numpy array of one or more dimensions, numbers or unicode; object arrays are refused),
``str``, ``bool``, ``int``, ``float``. :class:`~vla.data.memory_cache.MemoryCache` (HDF5, one file per
demonstration, every step) and :class:`~vla.data.stream_memory.StreamMemoryCache` (npz, one file per GST
question) classify and restore entries through these two functions, and key their files on the same
config identity (:meth:`~vla.transforms.memory.MemoryInputsConfig.to_json`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

SCALARS: dict[str, type] = {"str": str, "bool": bool, "int": int, "float": float}


def entry_kind(key: str, value: Any) -> str:
    """The kind of a memory entry's value; ``ValueError`` naming the entry for anything else."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0 or value.dtype == object:
            raise ValueError(f"memory entry {key!r}: cannot cache a {value.ndim}-d {value.dtype} array")
        return "array"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    raise ValueError(f"memory entry {key!r}: cannot cache a {type(value).__name__}")


def scalar(kind: str, value: Any) -> Any:
    """A stored scalar (a numpy scalar, bytes for ``str``) back as the Python value of its kind."""
    if kind == "str" and isinstance(value, bytes):
        return value.decode()
    return SCALARS[kind](value.item() if isinstance(value, np.generic) else value)
