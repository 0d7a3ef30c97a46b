"""Files written whole or not at all: a reader (or a resumed run) never sees half of one.

The one way the project writes a JSON document that must survive a kill (statistics, run identities,
summaries, manifests): a temporary file beside the target, flushed to disk, then ``os.replace``. It
lives in ``vla_common``, below every other package, so that every package can use it, and imports
nothing of ours.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: str | Path, obj: Any, allow_nan: bool = True) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically (parent directories created);
    ``allow_nan=False`` refuses NaN and infinities (``ValueError``) instead of writing them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")  # the name a resumed run's clean-up knows (vla/eval/identity.py)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, allow_nan=allow_nan)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
