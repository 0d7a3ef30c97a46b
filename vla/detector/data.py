"""Training frames for the learned detector: ego frames along apartments' exploration routes, with the
simulator's instance masks and categories as labels (scene truth of the split's scenes only).

One ``.npz`` per apartment under ``<out>/<split>/<seed>.npz`` (written whole or not at all; an apartment
already on disk is skipped, so a killed run resumes): ``rgb`` uint8 N x H x W x 3, ``depth`` float16
metres, ``instance`` int32 ids, ``sem`` uint8 (index into ``categories`` + 1, 0 = background),
``categories`` (the category list of the labels) and ``labels`` (JSON: per frame, id -> category).
The frames are rendered by the env's own route code (:meth:`envs.house.env.HouseEnv.route_frames`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
from tqdm import tqdm

from spatial_memory.frame import CameraFrame


def house_categories() -> tuple[str, ...]:
    """The apartments' detector label set (the family's category vocabulary), sorted."""
    from envs.perception import categories

    return tuple(categories("house").vocabulary)


def semantic(frame: CameraFrame, index: dict[str, int]) -> np.ndarray:
    """uint8 class map of a frame (category index + 1; 0 = background or a category not in ``index``)."""
    lut = np.zeros(int(frame.instance.max(initial=0)) + 1, dtype=np.uint8)
    for i, cat in frame.labels.items():
        if 0 < i < lut.size and cat in index:
            lut[i] = index[cat] + 1
    return lut[np.maximum(frame.instance, 0)]


def pack(frames: list[CameraFrame], categories: tuple[str, ...]) -> dict[str, np.ndarray]:
    index = {c: k for k, c in enumerate(categories)}
    return {
        "rgb": np.stack([f.rgb for f in frames]),
        "depth": np.stack([np.nan_to_num(f.depth, posinf=0.0) for f in frames]).astype(np.float16),
        "instance": np.stack([f.instance for f in frames]).astype(np.int32),
        "sem": np.stack([semantic(f, index) for f in frames]),
        "categories": np.array(categories),
        "labels": np.array(json.dumps([{str(k): v for k, v in f.labels.items()} for f in frames])),
    }


def apartment_frames(split: str, index: int, stride: int) -> tuple[int, list[CameraFrame]]:
    """(scene seed, ego frames every ``stride`` poses along the exploration route) of the split's
    ``index``-th apartment, from its first trial's start."""
    from envs.house.family import HouseFamily

    fam = HouseFamily()
    env = fam.make({"split": split, "num_scenes": index + 1}, index)
    try:
        env.reset(options={"trial": 0})
        frames = env.route_frames(env.exploration_route(), stride=stride)
        return int(env.scene.seed), frames
    finally:
        env.close()


def render(out: str | Path, split: str, first: int, count: int, stride: int = 8, progress: bool = True) -> list[Path]:
    """Render apartments ``first .. first+count-1`` of ``split`` to ``out/split`` (see the module doc)."""
    from envs.base import NoEpisode
    from envs.house.config import split_seeds

    cats = house_categories()
    root = Path(out) / split
    root.mkdir(parents=True, exist_ok=True)
    seeds = split_seeds(split, first + count)[first:]
    written = []
    for k, seed in enumerate(tqdm(seeds, desc=f"render {split}", disable=not progress, file=sys.stderr)):
        path = root / f"{seed}.npz"
        if not path.exists():
            try:
                got, frames = apartment_frames(split, first + k, stride)
            except NoEpisode as exc:  # no episode to reset into (e.g. no navigation target): no frames
                print(f"skipped {split} apartment {first + k}: {exc}", file=sys.stderr)
                continue
            assert got == seed, (got, seed)
            tmp = path.with_name(path.stem + ".tmp.npz")
            np.savez_compressed(tmp, **pack(frames, cats))
            tmp.replace(path)
        written.append(path)
    return written


def load_split(root: str | Path, split: str, categories: tuple[str, ...] | None = None) -> Iterator[dict]:
    """The apartments of a rendered split (dicts of arrays, as :func:`pack` wrote them), in seed order;
    their category lists must equal ``categories`` when given."""
    files = sorted((Path(root) / split).glob("*.npz"), key=lambda p: p.stem)
    files = [f for f in files if not f.stem.endswith(".tmp")]
    if not files:
        raise FileNotFoundError(
            f"no rendered apartments under {Path(root) / split} (run: python -m vla.detector render)"
        )
    for f in files:
        with np.load(f) as z:
            d = {k: z[k] for k in z.files}
        cats = tuple(str(c) for c in d["categories"])
        if categories is not None and cats != tuple(categories):
            raise ValueError(f"{f}: frames labelled with another category list ({len(cats)} categories)")
        d["labels"] = [{int(k): v for k, v in m.items()} for m in json.loads(str(d["labels"]))]
        d["scene"] = f.stem
        yield d
