"""A run's identity (``run.json``) and the leftovers of a killed run.

The identity holds everything that changes an episode's result: the env config, the agent config,
mid-episode extras, the seed, the trials per task, and the protocol as the env resolves it (each
task's step limit, settling steps, cameras and resolution, LIBERO's env seed, ...; defaults
included, so a config that leaves a key out and one that spells the default are the same run).
Resuming into an ``out`` whose ``run.json`` differs is refused, naming what differs, so episodes
of two settings are never mixed in one ``episodes.jsonl``. :func:`check_identity` is the one such
check of the project: ``vla-train`` and ``vla-gst eval`` keep their ``run.json`` through it too.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from envs.registry import make_env, resolved_config
from vla_common.atomic import write_json_atomic


def protocol(env_cfg: dict[str, Any], infos: dict[int, Any]) -> dict[str, Any]:
    """The resolved protocol: step limit per task and what the env declares of itself."""
    first = min(infos)
    env = make_env(env_cfg, first)
    try:
        spec = env.env_spec
        cams = [{"name": c.name, "height": c.height, "width": c.width} for c in spec.cameras]
        info = {k: v for k, v in spec.info.items() if isinstance(v, (str, int, float, bool, type(None)))}
    finally:
        env.close()
    return {"max_steps": {str(t): infos[t].max_steps for t in sorted(infos)}, "cameras": cams, "env": info}


def run_identity(spec, infos: dict[int, Any]) -> dict[str, Any]:
    return {
        "env": resolved_config(spec.env),
        "agent": spec.agent,
        "extra": spec.extra,
        "seed": int(spec.seed),
        "trials_per_task": int(spec.trials_per_task),
        **({"first_trial": int(spec.first_trial)} if spec.first_trial else {}),  # absent: 0 (older runs)
        "protocol": protocol(spec.env, infos),
        **({"perception": spec.perception} if spec.perception is not None else {}),
    }


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(k, "<unset>"), b.get(k, "<unset>"), f"{prefix}{k}.")
        return out
    return [] if a == b else [f"{prefix[:-1]}: {a!r} there, {b!r} now"]


def check_identity(
    out: str | Path,
    identity: dict[str, Any],
    holds: str = "episodes of a different run",
    compare: tuple[str, ...] | None = None,
    write: bool = True,
) -> None:
    """The one run-identity check (evaluation, training, GST answers): write ``out/run.json`` for a new
    run (atomically: a temporary file moved into place); refuse a different one with a ValueError that
    names each difference (``key.sub: <there> there, <now> now``) and what ``out`` ``holds``.

    ``compare``: the keys that make a run (default: every key of ``identity``); the other keys are
    notes, rewritten when they change. ``write=False`` only checks (a training run's ranks but the
    first)."""
    out = Path(out)
    run_file = out / "run.json"
    identity = json.loads(json.dumps(identity, default=str))  # as it reads back (tuples -> lists, int keys -> str)
    keys = list(identity) if compare is None else list(compare)
    if not run_file.exists():
        if write:
            out.mkdir(parents=True, exist_ok=True)
            write_json_atomic(run_file, identity)
        return
    try:
        previous = json.loads(run_file.read_text())
        if not isinstance(previous, dict):
            raise ValueError(f"a {type(previous).__name__}, not an object")
    except ValueError as exc:
        raise ValueError(f"{run_file} is not a run's identity ({exc}); delete it or choose another out=") from exc
    diff = _differences({k: previous.get(k, "<unset>") for k in keys}, {k: identity.get(k, "<unset>") for k in keys})
    if diff:
        shown = "; ".join(diff[:6]) + (f"; ... {len(diff) - 6} more" if len(diff) > 6 else "")
        raise ValueError(
            f"{out} holds {holds} ({run_file}): {shown}. "
            "Choose another out= or delete it; results of two settings are never mixed."
        )
    if write and any(previous.get(k) != v for k, v in identity.items() if k not in keys):
        write_json_atomic(run_file, {**previous, **identity})


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_ATOMIC_SUFFIXES = (".json.tmp", ".jsonl.tmp", ".hdf5.tmp", ".parquet.tmp", ".mp4.tmp")
_EPISODE_TMP = re.compile(r"^\..+\.(\d+)\.tmp\.(hdf5|mp4)$")  # .<episode stem>.<pid>.tmp.<ext>


def clean_temporaries(*roots: str | Path) -> list[Path]:
    """Remove what a killed run left half-written under ``roots``: the ``*.tmp`` files of atomic
    writes (json, jsonl, merged demos) and per-episode ``.<stem>.<pid>.tmp.<ext>`` files whose
    writer is dead. Nothing else is touched. Returns the removed paths."""
    removed = []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for p in root.rglob("*.tmp*"):
            if not p.is_file():
                continue
            m = _EPISODE_TMP.match(p.name)
            if m is None and not p.name.endswith(_ATOMIC_SUFFIXES):
                continue
            if m is not None and _pid_alive(int(m.group(1))):
                continue  # a live writer's episode in progress
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed
