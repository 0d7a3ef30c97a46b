"""``SpatialQASource``: spatial-perception question sets (``vla-data spatial``) as visual QA samples.

One sample per question; its episode is the question's scene (a scene's views never straddle a
train/val split). Images are the question's PNG files in the prompt's ``<image>`` order; the
answer is the record's answer string (docs/SPATIAL.md). ``tasks`` keeps only some task types.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .sample import Sample, SceneQuestions, check_episodes, check_index


class SpatialQASource(SceneQuestions):
    def __init__(self, root: str | Path, key: str = "spatial", tasks: list[str] | None = None) -> None:
        from vla.data.spatial_generate import load_records
        from vla.questions.perception.tasks import check_tasks

        root = Path(root)
        rows = load_records(root)
        if tasks is not None:
            check_tasks(tasks)
            rows = [r for r in rows if r["task"] in tasks]
        if not rows:
            raise ValueError(f"{root} holds no finished spatial questions (records.*.jsonl with scenes.*.jsonl)")
        for r in rows:
            if r["prompt"].count("<image>") != len(r["images"]):
                raise ValueError(f"{root}: question {r['id']} has {len(r['images'])} images for its <image> markers")
        self._setup(key, root, rows)

    def _setup(self, key: str, root: Path, rows: list[dict[str, Any]]) -> None:
        self.key, self.root, self._rows = key, root, rows

    def subset(self, episodes: set[str]) -> "SpatialQASource":
        keep = check_episodes(self, episodes)
        out = object.__new__(SpatialQASource)
        out._setup(self.key, self.root, [r for r in self._rows if r["scene"] in keep])
        return out

    def record(self, i: int) -> dict[str, Any]:
        return self._rows[check_index(self, i)]

    def images(self, i: int) -> list[np.ndarray]:
        import imageio.v3 as iio

        return [np.asarray(iio.imread(self.root / p))[..., :3] for p in self.record(i)["images"]]

    def sample(self, i: int) -> Sample:
        r = self.record(i)
        return Sample(
            dataset=self.key,
            episode=r["scene"],
            kind="qa",
            images=self.images(i),
            prompt=r["prompt"],
            answer=r["answer"],
        )

    def __repr__(self) -> str:
        return f"SpatialQASource({self.key!r}: {len(self)} questions, {len(self.episodes())} scenes)"
