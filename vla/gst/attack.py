"""A nearest-neighbour attacker on a GST question set or an export of one (docs/GST.md, export).

It answers the choice questions (TDS-E, TDS-M, TDS-H, Traj) from nothing but how the set's files
resemble each other -- no model of the scene, no reading of the video's content:

1. **grouping by media similarity**: every question's video becomes a sequence of frame thumbnails
   (grey, 24x24, zero mean and unit spread: blind to colour changes); two videos are as far apart as
   the mean distance from each frame to its nearest frame in the other (blind to thinned or reordered
   frames); questions are linked when their videos are closer than a threshold that splits all the
   pairwise distances into two classes (Otsu's criterion on their logarithms; no labels needed), and
   the linked questions form groups ("the same apartment");
2. **image distance from each option to every other file**: a top-down image's thumbnail is taken of
   its drawing's bounding box (blind to crops, pads and scale); for TDS-E the grey appearance, for
   TDS-M and TDS-H a crude wall layout (edge strength of the drawing); an option's score is its
   distance to the nearest top-down image of the other questions of its group, over its distance to
   the nearest one outside the group -- the right option is the apartment's own map, shown by its
   group's map questions; without a top-down image in the group, the answer is "A";
3. **letter elimination**: a group's questions whose option images tell nothing get the letter its
   other choice questions used least (the generator balances letters per apartment, in blocks of 4).

``groups`` can be given instead (an oracle: the true apartments), to measure step 2 and 3 alone.

    python -m vla.gst.attack runs/gst/test                                   # a question set
    python -m vla.gst.attack runs/gst/public --answers runs/gst/public.answers.jsonl   # an export
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

CHOICE = ("TDS-E", "TDS-M", "TDS-H", "Traj")
LETTERS = "ABCD"


def _grey(img: np.ndarray) -> np.ndarray:
    return np.asarray(img[..., :3], dtype=np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _standard(x: np.ndarray) -> np.ndarray:
    return ((x - x.mean()) / (x.std() + 1e-6)).ravel()


def frame_signature(img: np.ndarray, n: int = 24) -> np.ndarray:
    import cv2

    return _standard(cv2.resize(_grey(img), (n, n), interpolation=cv2.INTER_AREA))


def _drawing(img: np.ndarray) -> np.ndarray:
    """The top-down image cut to its drawing's bounding box (what differs from the corner's colour)."""
    img = np.asarray(img[..., :3])
    diff = np.abs(img.astype(np.int16) - img[0, 0].astype(np.int16)).max(axis=-1) > 24
    ys, xs = np.nonzero(diff)
    return img if len(xs) == 0 else img[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]


def map_signature(img: np.ndarray, layout: bool, n: int = 48) -> np.ndarray:
    import cv2

    g = cv2.resize(_grey(_drawing(img)), (n, n), interpolation=cv2.INTER_AREA)
    if layout:  # crude wall layout: where the drawing changes, smoothed
        gx, gy = cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1)
        g = cv2.GaussianBlur(np.hypot(gx, gy), (0, 0), 1.5)
    return _standard(g)


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.abs(a - b)))


def video_distance(a: np.ndarray, b: np.ndarray) -> float:
    d = np.abs(a[:, None, :] - b[None, :, :]).mean(axis=-1)
    return 0.5 * float(d.min(axis=1).mean() + d.min(axis=0).mean())


def two_classes(values: np.ndarray) -> float:
    """A threshold splitting the values (in log scale) into two classes of least spread within each
    (Otsu's criterion): "the same apartment" below it, "another one" above."""
    v = np.sort(np.log(np.asarray(values, dtype=np.float64) + 0.01))
    if len(v) < 2:
        return float("inf")
    n, c = len(v), np.cumsum(v)
    k = np.arange(1, n)
    mean_lo, mean_hi = c[:-1] / k, (c[-1] - c[:-1]) / (n - k)
    between = k * (n - k) * (mean_lo - mean_hi) ** 2
    i = int(np.argmax(between))
    return float(np.exp((v[i] + v[i + 1]) / 2) - 0.01)


class Attacker:
    def __init__(self, root: str | Path, rows: list[dict[str, Any]], max_frames: int = 40) -> None:
        self.root, self.rows, self.max_frames = Path(root), rows, max_frames
        self._images: dict[str, np.ndarray] = {}
        self._videos: dict[str, np.ndarray] = {}

    def image(self, rel: str) -> np.ndarray:
        if rel not in self._images:
            import imageio.v2 as imageio

            self._images[rel] = np.asarray(imageio.imread(self.root / rel))[..., :3]
        return self._images[rel]

    def video(self, rel: str) -> np.ndarray:
        if rel not in self._videos:
            import imageio.v2 as imageio

            frames = imageio.mimread(self.root / rel, memtest=False)
            idx = np.unique(np.linspace(0, len(frames) - 1, min(self.max_frames, len(frames))).round().astype(int))
            self._videos[rel] = np.stack([frame_signature(np.asarray(frames[i])) for i in idx])
        return self._videos[rel]

    # ------------------------------------------------------------------ 1. groups
    def groups(self) -> tuple[list[int], float]:
        """A group number per question (connected components of the close-video graph) and the threshold."""
        n = len(self.rows)
        sigs = [self.video(r["media"]["video"]) for r in self.rows]
        D = np.zeros((n, n))
        for i in range(n):
            for j in range(i + 1, n):
                same = self.rows[i]["media"]["video"] == self.rows[j]["media"]["video"]
                D[i, j] = D[j, i] = 0.0 if same else video_distance(sigs[i], sigs[j])
        tau = two_classes(D[np.triu_indices(n, 1)]) if n > 1 else 0.0
        parent = list(range(n))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i in range(n):
            for j in range(i + 1, n):
                if D[i, j] < tau:
                    parent[find(i)] = find(j)
        roots = {r: k for k, r in enumerate(dict.fromkeys(find(i) for i in range(n)))}
        return [roots[find(i)] for i in range(n)], tau

    # ------------------------------------------------------------------ 2. and 3. answers
    def _topdown(self, r: dict[str, Any]) -> list[str]:
        m = r["media"]
        return ([m["map"]] if "map" in m else []) + (list(m["options"]) if r["subtask"] == "Traj" else [])

    def answers(self, groups: list[int]) -> dict[str, str]:
        refs = [self._topdown(r) for r in self.rows]
        sig: dict[tuple[str, bool], np.ndarray] = {}

        def s(rel: str, layout: bool) -> np.ndarray:
            if (rel, layout) not in sig:
                sig[(rel, layout)] = map_signature(self.image(rel), layout)
            return sig[(rel, layout)]

        preds: dict[str, str] = {}
        blind: list[int] = []
        for i, r in enumerate(self.rows):
            if r["subtask"] not in ("TDS-E", "TDS-M", "TDS-H"):
                if r["subtask"] == "Traj":
                    blind.append(i)
                continue
            layout = r["subtask"] != "TDS-E"
            inside = [p for j, rs in enumerate(refs) if j != i and groups[j] == groups[i] for p in rs]
            outside = [p for j, rs in enumerate(refs) if groups[j] != groups[i] for p in rs]
            if not inside:
                preds[r["id"]] = "A"
                continue
            scores = []
            for o in r["media"]["options"]:
                d_in = min(_distance(s(o, layout), s(p, layout)) for p in inside)
                d_out = min((_distance(s(o, layout), s(p, layout)) for p in outside), default=1.0)
                scores.append(d_in / max(d_out, 1e-6))
            preds[r["id"]] = LETTERS[int(np.argmin(scores))]
        for i in blind:  # letter elimination within the group
            used = Counter(preds.get(r["id"]) for j, r in enumerate(self.rows) if groups[j] == groups[i] and j != i)
            preds[self.rows[i]["id"]] = min(LETTERS, key=lambda c: (used.get(c, 0), c))
        return preds


def load_rows(root: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (Path(root) / "questions.jsonl").read_text().splitlines() if line.strip()]


def attack(root: str | Path, groups: list[int] | None = None) -> dict[str, Any]:
    """The attacker's letters for the choice questions of the set at ``root``, with its groups."""
    rows = load_rows(root)
    a = Attacker(root, rows)
    tau = None
    if groups is None:
        groups, tau = a.groups()
    return {"predictions": a.answers(groups), "groups": groups, "tau": tau, "rows": rows}


def score(predictions: dict[str, str], truth: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per choice subtask and pooled: percent right (``truth``: id -> {"subtask", "answer"})."""
    hits: dict[str, list[bool]] = {}
    for qid, letter in predictions.items():
        t = truth[qid]
        hits.setdefault(t["subtask"], []).append(letter == t["answer"]["value"])
    pooled = [h for v in hits.values() for h in v]
    out = {code: 100.0 * float(np.mean(v)) for code, v in sorted(hits.items())}
    out["choice"] = 100.0 * float(np.mean(pooled)) if pooled else float("nan")
    out["n"] = len(pooled)
    return out


def group_purity(groups: list[int], scenes: list[str]) -> float:
    """Share of question pairs on which the groups agree with the true apartments (same or not)."""
    n = len(groups)
    agree = sum((groups[i] == groups[j]) == (scenes[i] == scenes[j]) for i in range(n) for j in range(i + 1, n))
    return agree / max(1, n * (n - 1) // 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", help="a directory with questions.jsonl (a question set or an export)")
    ap.add_argument("--answers", help="an export's private answer file (a question set holds its answers)")
    ap.add_argument("--oracle", action="store_true", help="group by the true apartments instead (step 1 perfect)")
    args = ap.parse_args(argv)
    rows = load_rows(args.root)
    if args.answers:
        private = [json.loads(line) for line in Path(args.answers).read_text().splitlines() if line.strip()]
        truth = {p["id"]: p for p in private}
    else:
        truth = {r["id"]: r for r in rows}
    scenes = [truth[r["id"]].get("scene", "") for r in rows]
    oracle = [sorted(set(scenes)).index(s) for s in scenes] if args.oracle else None
    result = attack(args.root, oracle)
    s = score(result["predictions"], truth)
    how = "the true apartments" if args.oracle else f"threshold {result['tau']:.3f}"
    print(
        f"groups: {len(set(result['groups']))} ({how}); "
        f"pairwise agreement with the true apartments {100 * group_purity(result['groups'], scenes):.1f} %"
    )
    print("  ".join(f"{k} {v:.1f}" for k, v in s.items() if k not in ("choice", "n")))
    print(f"choice questions pooled: {s['choice']:.1f} % of {s['n']} (chance 25)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
