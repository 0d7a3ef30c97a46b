"""The knobs of registering the memory to a given top-down image (:func:`.register.register_topdown`).

Their own module because both halves of registration read them: :mod:`.register_features` (what each
side's map is made of) and :mod:`.register` (the search, refinement and score), which builds on it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RegisterConfig:
    """Knobs of :func:`register_topdown`."""

    memory_mpp: float = 0.05  # resolution of the memory's own map (metres per pixel)
    dark_threshold: int = 100  # medium/hard: a pixel is structure when all its channels are below this
    coarse: int = 4  # downsampling of the translation search
    scale_band: float = 0.10  # +- relative scale searched around the extent-based estimate
    scale_step: float = 0.02
    wide_scale: float = (
        0.3  # the wide scale search (partial memories) goes down to this fraction of the largest fitting scale
    )
    # levels on which a partial memory gets the open scale search (easy: its colour edges are dense enough for
    # spurious fits at a wrong scale, which the colour check of the score turns down)
    wide_levels: tuple[str, ...] = ("easy", "medium", "hard")
    score_floor: float = 0.35  # score at which the confidence starts rising from 0
    rotation_peaks: int = 4  # orientation-histogram peaks tried (each in both senses)
    sweep_step_deg: float = 3.0  # full rotation sweep when the histograms are flat
    candidates: int = 6  # coarse solutions refined
    icp_iterations: int = 30
    polish_scales: tuple[float, ...] = (-0.015, -0.0075, 0.0075, 0.015)  # relative scales tried around the winner
    min_confidence: float = 0.4  # TopDownRegistration.ok threshold
    colour_levels: tuple[str, ...] = ("easy",)  # levels drawn in the scene's colours: the score checks them
    colour_tolerance: float = 0.04  # chromaticity (r, g, b over their sum) L1 distance that counts as agreeing
    colour_floor: float = 0.5  # colour agreement at which the confidence starts rising from 0 ...
    colour_span: float = 0.3  # ... and over how much more it reaches full (a right fit agrees on 0.85-0.98)
    colour_samples: int = 2000  # observed places whose colours rank the coarse solutions (a subsample)
    colour_slack: float = 0.05  # the open scale search's fit may agree in colour this much less than the other
