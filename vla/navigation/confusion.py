"""What a detector confuses, learned from val streams: for each true category, the label its instances
end up with in memory, so that a search for a category can visit objects labelled as a class the target
is often taken for (a sofa the detector calls a bed in every view).

A memory object's category is the majority label of the detections fused into it. So the unit counted
here is the *instance* on a stream: every detected segment of a perceived frame is matched to the true
instance most of its pixels show in the simulator's frame (the detector's ids are frame-local; the
simulator's are not), and an instance's label on the stream is the majority of its detections' labels
(``""`` when it was never detected). Over many streams, ``counts[true][label]`` = instances of category
``true`` whose label was ``label``; :meth:`ConfusionModel.p_target` is P(true = target | label), the
chance that an object the memory labels ``label`` is the target.

Learning reads scene truth (the simulator's masks and labels) and is done once, on val apartments
(``scripts/learn_confusions.py``); the navigator reads only the counts (``agent.navigator.confusions=``).

    model = ConfusionModel.load("runs/confusions/harsh.json")
    model.labels_for("sofa", min_p=0.1)    # [("bed", 0.23), ...]: labels worth a visit when no sofa is known
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from spatial_memory.queries import normalise_category

FORMAT = "vla.navigation.confusions/1"


def segment_matches(raw, seen, min_overlap: float = 0.5) -> list[tuple[int, str]]:
    """(true instance id, detected label) for each detected segment of ``seen`` (a perceived frame) that
    lies on one true instance of ``raw`` (the simulator's frame of the same view) for at least
    ``min_overlap`` of its pixels. Segments on background or split between instances are skipped."""
    if raw.instance is None or seen.instance is None:
        return []
    ids, inverse = np.unique(seen.instance.ravel(), return_inverse=True)
    out = []
    truth = raw.instance.ravel()
    for k, i in enumerate(ids):
        if i <= 0 or int(i) not in seen.labels:
            continue
        under = truth[inverse == k]
        t, n = np.unique(under, return_counts=True)
        j = int(np.argmax(n))
        if t[j] > 0 and n[j] >= min_overlap * len(under):
            out.append((int(t[j]), str(seen.labels[int(i)])))
    return out


def stream_labels(pairs: Iterable[tuple[object, object]], min_overlap: float = 0.5) -> dict[str, str]:
    """Each true instance of one stream (``(raw, seen)`` frame pairs, in order) with its category and the
    majority label of its detections: ``{"<category>#<id>": label}``, ``""`` for an instance never
    detected. Ties go to the label seen first."""
    cats: dict[int, str] = {}
    votes: dict[int, Counter] = {}
    for raw, seen in pairs:
        present = set(np.unique(raw.instance).tolist()) if raw.instance is not None else set()
        for i, c in (raw.labels or {}).items():
            if i > 0 and i in present:
                cats.setdefault(int(i), str(c))
        for t, label in segment_matches(raw, seen, min_overlap):
            votes.setdefault(t, Counter())[label] += 1
    return {f"{c}#{i}": (votes[i].most_common(1)[0][0] if i in votes else "") for i, c in sorted(cats.items())}


@dataclass
class ConfusionModel:
    """``counts[true][label]``: instances of category ``true`` labelled ``label`` in memory (``""``: never
    detected), over the streams it was learned from (``source`` says which)."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    source: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        clean: dict[str, dict[str, int]] = {}
        for t, row in self.counts.items():
            for label, n in row.items():
                if int(n) < 0:
                    raise ValueError(f"confusion counts must be >= 0, got {t!r} -> {label!r}: {n}")
                if int(n):
                    key = normalise_category(label) if label else ""
                    clean.setdefault(normalise_category(t), {})[key] = int(n)
        self.counts = clean

    @classmethod
    def learn(cls, streams: Iterable[dict[str, str]], source: dict | None = None) -> "ConfusionModel":
        """The model of many streams' :func:`stream_labels`."""
        counts: dict[str, dict[str, int]] = {}
        for labels in streams:
            for key, label in labels.items():
                cat = key.rsplit("#", 1)[0]
                row = counts.setdefault(cat, {})
                row[label] = row.get(label, 0) + 1
        return cls(counts, dict(source or {}))

    def p_target(self, target: str, label: str) -> float:
        """P(an object labelled ``label`` is of category ``target``): 0 for a label never seen."""
        target, label = normalise_category(target), normalise_category(label)
        total = sum(row.get(label, 0) for row in self.counts.values())
        return self.counts.get(target, {}).get(label, 0) / total if total else 0.0

    def labels_for(self, target: str, min_p: float) -> list[tuple[str, float]]:
        """The labels other than ``target`` an object of it is found under, with P(target | label) >=
        ``min_p``, most likely first."""
        target = normalise_category(target)
        out = [
            (label, self.p_target(target, label)) for label in self.counts.get(target, {}) if label and label != target
        ]
        return sorted([x for x in out if x[1] >= min_p], key=lambda x: (-x[1], x[0]))

    def recall(self, target: str) -> float:
        """Of the instances of ``target``: the fraction labelled ``target`` in memory."""
        row = self.counts.get(normalise_category(target), {})
        n = sum(row.values())
        return row.get(normalise_category(target), 0) / n if n else 0.0

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict:
        return {"format": FORMAT, "source": self.source, "counts": self.counts}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "ConfusionModel":
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(
                f"no confusion model at {path}: learn one with scripts/learn_confusions.py (docs/NAVIGATION.md)"
            )
        d = json.loads(path.read_text())
        if d.get("format") != FORMAT:
            raise ValueError(f"{path} is not a confusion model (format {d.get('format')!r}, expected {FORMAT!r})")
        return cls(d.get("counts", {}), d.get("source", {}))
