"""The knobs of localising a view without a pose (:func:`.localize.localize`).

Their own module because both halves of localisation read them: :mod:`.localize` (hypotheses,
refinement, verification) and :mod:`.scanmatch` (the map index, the view's scan, the correlative
search), and :mod:`.localize` builds on :mod:`.scanmatch`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LocalizeConfig:
    """Knobs of :func:`localize` (metres and degrees). The defaults suit 5 cm voxel maps of rooms."""

    cell: float = 0.1  # grid of the correlative search
    yaw_step_deg: float = 5.0  # headings tried by the correlative search
    bands: tuple[float, ...] = (0.1, 1.0)  # lower edges of the height bands (the last one ends at the ceiling)
    floor_clearance: float = 0.1  # points below are floor
    max_range: float = 8.0  # depth beyond is not used
    scan_pixels: int = 80  # the view is subsampled to at most this many pixels along its long side
    scan_voxel: float = 0.1  # scan downsampling
    free_gap: float = 0.3  # free-space samples along the rays stop this far before the hit
    near_gaps: tuple[float, ...] = (
        0.08,
        0.13,
    )  # ... plus samples this far in front of surfaces seen head-on (along the normal)
    free_weight: float = 1.0  # weight of a free-space sample landing on an occupied cell (vs a hit)
    likelihood_sigma: float = 0.1  # blur of the occupancy likelihood field
    candidates: int = 10  # geometric hypotheses kept from the correlative search
    refine: int = 5  # geometric hypotheses (best correlation first) refined by ICP, with all object hypotheses
    polish: int = 3  # distinct leaders after ICP polished by a pattern search on the score
    distinct_m: float = 0.25  # a pose this far from the best (or distinct_deg) is a competitor for the margin
    distinct_deg: float = 6.0
    icp_iterations: int = 6  # at most, per distance gate (0.5, 0.3, 0.2, 0.12 m)
    icp_points: int = 400  # scan points used by ICP (an even subsample)
    semantic_icp: bool = True  # points of uniquely matched objects pair only with that object's voxels
    inlier_m: float = 0.1  # a scan point within this of an occupied voxel centre is an inlier
    min_confidence: float = 0.5  # Localization.ok threshold
    margin_geometry: float = 0.1  # score margin over the runner-up that makes a pose certain (no object matched)
    margin_objects: float = 0.05  # ... with objects matched
    min_object_pixels: int = 20  # at 256x256; scaled with the image area
    scan_block_median: bool = False  # noisy depth: a scan pixel is the median of its block, not one reading
