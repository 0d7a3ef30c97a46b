"""What each side of a registration to a top-down image is made of (:mod:`.register`, module doc, step 1):
the edges and structure of the given image, and the memory's own map of the same level drawn as metric
points (its edges, the places it observed and, on the levels drawn in the scene's colours, what colour it
saw there); the orientation histograms the rotation search compares.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from .maps import MapConfig
from .register_config import RegisterConfig
from .topdown import TopDownFrame


def _boundary(mask: np.ndarray) -> np.ndarray:
    """Pixels of ``mask`` with a 4-neighbour outside it."""
    if not mask.any():
        return mask.copy()
    return mask & ~ndimage.binary_erosion(mask, border_value=0)


def _colour_edges(rgb: np.ndarray, valid: np.ndarray | None = None, rel: float = 0.15) -> np.ndarray:
    """Pixels where the colour changes (sum of channel Sobel magnitudes above a threshold relative to
    the strong edges), thinned to one side by non-maximum suppression along the gradient."""
    img = ndimage.gaussian_filter(rgb.astype(np.float32), sigma=(0.7, 0.7, 0))
    gx = sum(ndimage.sobel(img[..., c], axis=1) for c in range(3))
    gy = sum(ndimage.sobel(img[..., c], axis=0) for c in range(3))
    mag = np.hypot(gx, gy)
    if valid is not None:
        mag[~valid] = 0.0
    strong = np.percentile(mag[mag > 0], 99) if (mag > 0).any() else 0.0
    if strong <= 0:
        return np.zeros(mag.shape, dtype=bool)
    return mag > rel * strong


def chromaticity(rgb: np.ndarray) -> np.ndarray:
    """(r, g, b) / (r + g + b) of uint8 colours (offset by 1: black has one): what a colour keeps under
    a change of brightness (the top-down render is lit from above, the camera sees the same surfaces
    darker or brighter)."""
    c = rgb.astype(np.float32) + 1.0
    return c / c.sum(axis=-1, keepdims=True)


def image_features(image: np.ndarray, level: str, cfg: RegisterConfig) -> tuple[np.ndarray, np.ndarray]:
    """(edge mask, structure mask) of a given top-down image (:mod:`.register`, module doc, step 1)."""
    if level == "easy":
        background = np.all(image >= 245, axis=-1)
        edges = _colour_edges(image)
        structure = ~background
    else:
        structure = np.all(image < cfg.dark_threshold, axis=-1)
        edges = _boundary(structure)
    return edges, structure


def memory_features(
    mem, level: str, cfg: RegisterConfig, map_config: MapConfig | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(edge points Nx2, seen points Mx2, colours of the seen points Mx3 uint8 or None) of the memory's own
    map of ``level``, memory-frame metres: the edges to match, the map pixels where the memory observed
    anything (floor included) and, on the levels drawn in the scene's colours, what it saw there."""
    frame = _memory_frame(mem, cfg.memory_mpp)
    lay = mem.layers(frame, map_config)
    seen = np.isfinite(lay.top_z)
    rgb = None
    if level == "easy":
        # small unseen holes (sparse views) would each draw an edge ring: fill them from the nearest seen pixel
        filled = ndimage.binary_closing(seen, iterations=2, border_value=0) | seen
        _, (nr, nc) = ndimage.distance_transform_edt(~seen, return_indices=True)
        colour = lay.colour[nr, nc]
        colour[~filled] = 255
        edges = _colour_edges(colour, valid=None) & ndimage.binary_dilation(filled)
        seen = filled
        if level in cfg.colour_levels:
            rgb = colour[seen]
    else:
        # walls are seen surfaces (already a boundary); object footprints are filled: keep their outline
        edges = lay.walls | (_boundary(lay.objects) if level == "medium" else False)
    return _pixel_points(frame, edges), _pixel_points(frame, seen), rgb


def memory_side(
    mem, level: str, cfg: RegisterConfig, map_config: MapConfig | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(edge points, seen points, orientation histogram of the edges) of the memory's map of ``level``:
    what registration needs of the memory, whatever the image. Kept by the memory until its contents
    change (:meth:`SpatialMemory.derived`), so the images of one memory (a question's four candidate
    maps, every question of a scene) reuse it."""

    def build() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        pts, seen_pts, rgb = memory_features(mem, level, cfg, map_config)
        mframe = _memory_frame(mem, cfg.memory_mpp)
        mem_mask = np.zeros((mframe.height, mframe.width), dtype=bool)
        uv = mframe.world_to_pixel(pts).astype(np.int64)
        mem_mask[np.clip(uv[:, 1], 0, mframe.height - 1), np.clip(uv[:, 0], 0, mframe.width - 1)] = True
        return pts, seen_pts, orientation_histogram(mem_mask), None if rgb is None else chromaticity(rgb)

    return mem.derived(("register", level, cfg, map_config), build)


def _memory_frame(mem, mpp: float) -> TopDownFrame:
    b = mem.default_frame(margin=0.5)
    x0, y0, x1, y1 = b.xmin, b.ymin, b.xmax, b.ymax
    w = int(np.ceil((x1 - x0) / mpp))
    h = int(np.ceil((y1 - y0) / mpp))
    return TopDownFrame(x0, y0, x0 + w * mpp, y0 + h * mpp, w, h)


def _pixel_points(frame: TopDownFrame, mask: np.ndarray) -> np.ndarray:
    r, c = np.nonzero(mask)
    return frame.pixel_to_world(np.stack([c + 0.5, r + 0.5], axis=-1).astype(np.float64)).reshape(-1, 2)


def orientation_histogram(mask: np.ndarray, bins: int = 180) -> np.ndarray:
    """Histogram of local line orientations (degrees mod 180, metric frame: y up), from the structure
    tensor integrated over ~4 px (a rasterised line at a small angle is a staircase: raw gradients would
    see its steps, the tensor sees the line), weighted by strength x coherence."""
    f = ndimage.gaussian_filter(mask.astype(np.float32), 1.0)
    gu, gv = ndimage.sobel(f, axis=1), -ndimage.sobel(f, axis=0)  # metric y up
    juu = ndimage.gaussian_filter(gu * gu, 4.0)
    jvv = ndimage.gaussian_filter(gv * gv, 4.0)
    juv = ndimage.gaussian_filter(gu * gv, 4.0)
    tr = juu + jvv
    if tr.max() <= 0:
        return np.zeros(bins)
    diff = np.hypot(juu - jvv, 2 * juv)  # = tr * coherence
    sel = tr > 0.05 * tr.max()
    ang = np.degrees(0.5 * np.arctan2(2 * juv[sel], juu[sel] - jvv[sel])) % 180.0  # dominant gradient direction
    h, _ = np.histogram(ang, bins=bins, range=(0, 180), weights=diff[sel])
    return ndimage.gaussian_filter1d(h.astype(np.float64), 1.0, mode="wrap")
