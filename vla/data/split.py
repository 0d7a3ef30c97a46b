"""Train/val splits by episode (never by step), deterministic from the episode id and a seed."""

from __future__ import annotations

import hashlib

from .sample import SampleSource


def episode_score(episode: str, seed: int) -> float:
    """A uniform number in [0, 1) from (seed, episode id): stable across processes and runs."""
    digest = hashlib.sha256(f"{int(seed)}\x00{episode}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def split_episodes(episodes: list[str], val_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """(train, val) episode ids: an episode goes to val when its score is below ``val_fraction``.

    Each episode's side depends only on its own id and the seed, so adding episodes never moves the
    others -- except for the guarantees: at least one val episode when ``val_fraction > 0`` and there
    are >= 2 episodes (the lowest score), and at least one train episode when ``val_fraction < 1``
    (the highest score)."""
    if not 0.0 <= float(val_fraction) <= 1.0:
        raise ValueError(f"val_fraction must be in [0, 1], got {val_fraction}")
    eps = sorted(set(episodes))
    scores = {e: episode_score(e, seed) for e in eps}
    val = {e for e in eps if scores[e] < val_fraction}
    if val_fraction > 0 and len(eps) >= 2 and not val:
        val.add(min(eps, key=scores.__getitem__))
    if val_fraction < 1 and len(eps) >= 2 and len(val) == len(eps):
        val.discard(max(eps, key=scores.__getitem__))
    return [e for e in eps if e not in val], [e for e in eps if e in val]


def split_by_episode(source: SampleSource, val_fraction: float, seed: int) -> tuple[SampleSource, SampleSource]:
    """``(train_source, val_source)``: the same source restricted to disjoint sets of episodes."""
    train, val = split_episodes(source.episodes(), val_fraction, seed)
    return source.subset(set(train)), source.subset(set(val))
