"""Image orientations: how a camera's rows and columns are laid out, and turning between them.

A renderer's raw buffer is ``opengl`` (bottom row first); ``upright`` is the image as a person sees
it; ``rot180`` is LIBERO's published convention (both axes flipped). Every image-like array (RGB,
depth, instance ids) and its intrinsics ``K`` are turned with the same functions, here only.
"""

from __future__ import annotations

import numpy as np

ORIENTATIONS = ("rot180", "upright", "opengl")

# the flips (rows, columns) that take the OpenGL buffer to each orientation
_FLIPS = {"rot180": (True, True), "upright": (True, False), "opengl": (False, False)}


def check_orientation(orientation: str) -> str:
    """``orientation`` itself, or ``ValueError`` naming the valid ones."""
    if orientation not in _FLIPS:
        raise ValueError(f"unknown image orientation {orientation!r}; expected one of {ORIENTATIONS}")
    return orientation


def orient(raw: np.ndarray, orientation: str) -> np.ndarray:
    """An OpenGL (bottom-up) buffer in the requested orientation (a view, no copy)."""
    rows, cols = _FLIPS[check_orientation(orientation)]
    return raw[:: -1 if rows else 1, :: -1 if cols else 1]


def reorient(x: np.ndarray, src: str | None, dst: str | None, stacked: bool = False) -> np.ndarray:
    """An image-like array (H, W, ...) in orientation ``src`` as it looks in orientation ``dst``
    (``stacked``: a sequence of them, (T, H, W, ...)); ``x`` itself when either is None or they agree,
    else a contiguous copy."""
    if src is None or dst is None or src == dst:
        return x
    (r0, c0), (r1, c1) = _FLIPS[check_orientation(src)], _FLIPS[check_orientation(dst)]
    rows, cols = slice(None, None, -1 if r0 != r1 else 1), slice(None, None, -1 if c0 != c1 else 1)
    return np.ascontiguousarray(x[:, rows, cols] if stacked else x[rows, cols])


def reorient_K(K: np.ndarray, shape: tuple[int, int], src: str | None, dst: str | None) -> np.ndarray:
    """The intrinsics that go with :func:`reorient` for an image of ``shape`` (H, W): a flipped axis
    negates its focal length and mirrors its principal point (pixel-index coordinates, u' = W - 1 - u)."""
    if src is None or dst is None or src == dst:
        return K
    (r0, c0), (r1, c1) = _FLIPS[check_orientation(src)], _FLIPS[check_orientation(dst)]
    K = np.array(K, dtype=np.float64)
    h, w = shape
    if r0 != r1:
        K[1, 1], K[1, 2] = -K[1, 1], (h - 1) - K[1, 2]
    if c0 != c1:
        K[0, 0], K[0, 2] = -K[0, 0], (w - 1) - K[0, 2]
    return K
