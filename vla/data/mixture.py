"""``Mixture``: weighted sampling over several sources, a pure function of (step, seed).

``sample_indices(step, batch_size, seed)`` draws each batch element's source with probability
proportional to its weight, then a sample of that source uniformly, from
``np.random.default_rng([seed, step])`` alone: a run resumed at step ``s`` draws exactly the batches
an uninterrupted run would have drawn, whatever happened before.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .sample import Sample, SampleSource


class Mixture:
    def __init__(self, sources: Sequence[SampleSource], weights: Sequence[float]) -> None:
        self.sources = list(sources)
        if not self.sources:
            raise ValueError("a Mixture needs at least one source")
        if len(weights) != len(self.sources):
            raise ValueError(
                f"a Mixture needs one weight per source: {len(self.sources)} sources, {len(weights)} weights"
            )
        w = [float(x) for x in weights]
        if any(not math.isfinite(x) or x < 0 for x in w) or sum(w) <= 0:
            raise ValueError(f"Mixture weights must be finite, >= 0 and not all 0, got {list(weights)}")
        for s, x in zip(self.sources, w):
            if x > 0 and len(s) == 0:
                raise ValueError(f"source {s.key!r} has weight {x} but no samples")
        self.weights = w
        self.probabilities = np.asarray(w) / sum(w)

    def __len__(self) -> int:
        return sum(len(s) for s in self.sources)

    def sample_indices(self, step: int, batch_size: int, seed: int) -> list[tuple[int, int]]:
        """``batch_size`` pairs (source index, sample index) for training step ``step``."""
        if int(batch_size) < 1 or int(step) < 0:
            raise ValueError(f"sample_indices needs step >= 0 and batch_size >= 1, got {step}, {batch_size}")
        rng = np.random.default_rng([int(seed), int(step)])
        which = rng.choice(len(self.sources), size=int(batch_size), p=self.probabilities)
        u = rng.random(int(batch_size))
        sizes = np.array([len(s) for s in self.sources])
        index = np.minimum((u * sizes[which]).astype(np.int64), sizes[which] - 1)
        return [(int(s), int(i)) for s, i in zip(which, index)]

    def batch(self, step: int, batch_size: int, seed: int) -> list[Sample]:
        """The samples of :meth:`sample_indices` (convenience; a DataLoader maps indices itself)."""
        return [self.sources[s].sample(i) for s, i in self.sample_indices(step, batch_size, seed)]
