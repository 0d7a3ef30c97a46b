"""Config dataclasses from plain data, strictly: an unknown key is refused, naming the valid ones.

Every config of the project (the Hydra groups' schemas, the memory's, a perception profile's parts)
is a dataclass built from a dict that came from YAML, the command line, a checkpoint or a file; this
is the one place that turns such a dict into the dataclass. It lives in ``vla_common``, below every
other package, so that every package can use it, and imports nothing of ours.

    cfg = from_dict(HouseConfig, {"name": "house", "split": "val"}, "house env", ignore=("name",))

Conversions a class needs (lists from YAML to tuples, nested dicts to dataclasses) belong in its
``__post_init__`` or its own ``from_dict`` before the call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def check_keys(given: Iterable[Any], valid: Iterable[str], what: str) -> None:
    """ValueError ``unknown <what> option(s) [...]; valid options: [...]`` when ``given`` has a key
    outside ``valid``."""
    valid = sorted(valid)
    unknown = sorted(set(given) - set(valid), key=str)
    if unknown:
        raise ValueError(f"unknown {what} option(s) {unknown}; valid options: {valid}")


def field_names(cls: type) -> list[str]:
    """The field names of a dataclass, in declaration order."""
    return [f.name for f in dataclasses.fields(cls)]


def from_dict(cls: type[T], d: Mapping[str, Any] | None, what: str, ignore: Iterable[str] = ()) -> T:
    """``cls(**d)`` after refusing keys that are not fields of ``cls`` (see :func:`check_keys`);
    ``None`` is an empty dict; keys in ``ignore`` are dropped first (``("name",)``: a Hydra group's
    choice, which is not an option of the schema)."""
    if d is None:
        d = {}
    if not isinstance(d, Mapping):
        raise ValueError(f"{what} options must be a map of option -> value, got {type(d).__name__}")
    d = {k: v for k, v in d.items() if k not in set(ignore)}
    check_keys(d, field_names(cls), what)
    return cls(**d)
