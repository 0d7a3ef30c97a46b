"""Disguised copies of question media, one per exported question (``vla-gst export``, docs/GST.md).

An export gives every question its own copy of every medium, made unlike every other copy of the same
source (no two files of an export are near-duplicates: a matcher cannot pair a TDS option with the map
file of another question, nor find the questions that share a video by comparing files), while
keeping what the question asks about:

* a **camera recording** (a question's video with its sensor stream and red boxes; its current view;
  a Traj clip) is a :class:`CameraCopy`: zoomed about the image centre by its own random factor
  (what is straight ahead stays in the middle; ``K`` is scaled to match, so depth back-projects to
  the same points), recoloured (a gain and an offset per channel), with fresh pixel noise (sparse in
  sensor streams, which must stay compressible); a video
  and its stream lose the same random few frames (never a frame with a red box) and are numbered
  from 0; poses lie in an odometry frame of the copy's own (a random rotation and offset on the
  floor: relative motion is exact); instance ids are drawn afresh (one random id per object for the
  whole question when ids are stable, ``gt``; new ones in every frame under a detector profile) and
  label tables are listed by id; depth and masks are zoomed by nearest pixel (the values stay
  measured ones, and no two copies share an array: every copy has its own zoom);
* a **top-down image** (a map, each option) is a :class:`MapCopy`: each margin cropped or padded by
  its own random amount (never into the drawing), the whole scaled by a random factor (one factor:
  headings do not change), recoloured, with sparse noise of a few grey levels (never enough to turn
  wall into free space: walls stay below 20, free space above 220); a point on it moves with it
  (:meth:`MapCopy.grid`), so GP and Pos answers are rewritten;
* videos are re-encoded (H.264 at a random quality), images written as new PNGs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import make_T, rot_z
from spatial_memory.perception import MAX_LOCAL_ID

ZOOM = (1.03, 1.15)  # camera copies: zoom about the image centre
GAIN, OFFSET = (0.92, 1.06), (-8.0, 8.0)  # per channel, camera and map copies
CAMERA_NOISE = (1.0, 2.5)  # camera copies: sigma of Gaussian pixel noise (grey levels)
THIN = (0.0, 0.15)  # fraction of the unboxed frames a copy of a video and its stream leave out
FLOOR_OFFSET_M = 5.0  # the copy's odometry frame: a random yaw and an offset up to this on the floor
MARGIN = 0.06  # map copies: each side cropped (inside the margin only) or padded by up to this share
MAP_SCALE = (0.8, 1.1)
SPARSE_NOISE = (0.05, 3)  # maps and sensor streams: share of pixels moved, by up to this many grey levels


def _recolour(img: np.ndarray, gain: np.ndarray, offset: np.ndarray) -> np.ndarray:
    return img.astype(np.float32) * gain + offset


class IdMap:
    """Instance ids of one question's copies: ``stable`` (the ids mean the same object in every frame and
    view, ``gt``) gives each true id one random new id for the whole question; otherwise (frame-local
    ids of a detector) every frame gets fresh ones."""

    def __init__(self, rng: np.random.Generator, stable: bool) -> None:
        self.rng, self.stable = rng, stable
        self._map: dict[int, int] = {}

    def frame(self, instance: np.ndarray, labels: dict[int, str]) -> tuple[np.ndarray, dict[int, str]]:
        ids = sorted({int(i) for i in np.unique(instance) if i > 0} | {int(i) for i in labels if i > 0})
        if self.stable:
            used = set(self._map.values())
            for i in ids:
                while i not in self._map:
                    n = int(self.rng.integers(1, MAX_LOCAL_ID))
                    if n not in used:
                        self._map[i] = n
                        used.add(n)
            lut = self._map
        else:
            lut = dict(zip(ids, (int(n) for n in self.rng.choice(MAX_LOCAL_ID - 1, size=len(ids), replace=False) + 1)))
        table = np.zeros(int(max(ids, default=0)) + 1, dtype=np.int32)
        for i in ids:
            table[i] = lut[i]
        out = table[np.clip(instance, 0, None)]
        new_labels = {lut[int(i)]: c for i, c in labels.items() if int(i) > 0}
        return out.astype(np.int32), dict(sorted(new_labels.items()))


class CameraCopy:
    """One disguise of one camera recording (see the module doc): :meth:`image` for pictures,
    :meth:`frame` for sensor frames, :meth:`box` for red-box coordinates, :meth:`keep` for the frames kept."""

    def __init__(self, rng: np.random.Generator, ids: IdMap, T_odom: np.ndarray | None = None) -> None:
        self.rng, self.ids = rng, ids
        self.zoom = float(rng.uniform(*ZOOM))
        self.gain, self.offset = rng.uniform(*GAIN, 3), rng.uniform(*OFFSET, 3)
        self.noise = float(rng.uniform(*CAMERA_NOISE))
        self.thin = float(rng.uniform(*THIN))
        self.T_odom = T_odom if T_odom is not None else random_floor_frame(rng)
        self._grids: dict[tuple[int, int], tuple] = {}

    # ------------------------------------------------------------------ geometry
    def _centre(self, shape: tuple[int, ...]) -> tuple[float, float]:
        return (shape[1] - 1) / 2.0, (shape[0] - 1) / 2.0

    def _warp(self, img: np.ndarray, nearest: bool) -> np.ndarray:
        """The image zoomed about its centre (output pixel u shows input pixel c + (u - c) / zoom)."""
        H, W = img.shape[:2]
        if (H, W) not in self._grids:
            cx, cy = self._centre(img.shape)
            u = cx + (np.arange(W) - cx) / self.zoom
            v = cy + (np.arange(H) - cy) / self.zoom
            near = (np.clip(np.rint(v), 0, H - 1).astype(int)[:, None], np.clip(np.rint(u), 0, W - 1).astype(int))
            self._grids[(H, W)] = (near, *np.meshgrid(u.astype(np.float32), v.astype(np.float32)))
        near, mx, my = self._grids[(H, W)]
        if nearest:
            return img[near]
        import cv2

        return cv2.remap(img, mx, my, interpolation=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)

    def K(self, K: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        cx, cy = self._centre(shape)
        K = np.array(K, dtype=np.float64)
        K[0, 0] *= self.zoom
        K[1, 1] *= self.zoom
        K[0, 2] = cx + self.zoom * (K[0, 2] - cx)
        K[1, 2] = cy + self.zoom * (K[1, 2] - cy)
        return K

    def box(self, box: list[int], shape: tuple[int, ...]) -> list[int] | None:
        """A red box's pixel corners in the copy; None when the zoom leaves less than 2 pixels of it."""
        H, W = shape[:2]
        cx, cy = self._centre(shape)
        x0, y0, x1, y1 = box
        nx = np.clip(np.rint(cx + self.zoom * (np.array([x0, x1]) - cx)), 0, W - 1).astype(int)
        ny = np.clip(np.rint(cy + self.zoom * (np.array([y0, y1]) - cy)), 0, H - 1).astype(int)
        if nx[1] - nx[0] < 2 or ny[1] - ny[0] < 2:
            return None
        return [int(nx[0]), int(ny[0]), int(nx[1]), int(ny[1])]

    def keep(self, n: int, boxed: set[int]) -> list[int]:
        """Indices of the frames this copy keeps (every boxed frame, and at least two)."""
        drop = self.rng.random(n) < self.thin
        kept = [i for i in range(n) if i in boxed or not drop[i]]
        return kept if len(kept) >= 2 else list(range(n))

    # ------------------------------------------------------------------ pixels
    def image(self, rgb: np.ndarray, sparse: bool = False) -> np.ndarray:
        """A picture's copy: Gaussian noise on every pixel, or (``sparse``, for sensor streams, which stay
        compressible) a few grey levels on a few percent of the pixels."""
        out = _recolour(self._warp(np.ascontiguousarray(rgb[..., :3]), nearest=False), self.gain, self.offset)
        if sparse:
            _sparse_noise(out, self.rng)
        else:
            out += self.rng.normal(0.0, self.noise, out.shape).astype(np.float32)
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)

    def frame(self, f: CameraFrame, step: int, pose: bool = True) -> CameraFrame:
        """A sensor frame's copy: the picture (sparse noise), depth and masks zoomed alike (nearest
        pixel: depth values stay measured ones), ``K`` to match, ids redrawn, the pose moved to the
        copy's odometry frame (or none), numbered ``step``."""
        instance, labels = (
            (None, dict(f.labels))
            if f.instance is None
            else self.ids.frame(self._warp(f.instance, nearest=True), f.labels)
        )
        return CameraFrame(
            rgb=self.image(f.rgb, sparse=True),
            depth=self._warp(f.depth, nearest=True),
            K=self.K(f.K, f.rgb.shape),
            T_world_cam=self.T_odom @ f.T_world_cam if pose else np.eye(4),
            instance=instance,
            labels=labels,
            step=step,
        )


def _sparse_noise(img: np.ndarray, rng: np.random.Generator) -> None:
    """In place: ``SPARSE_NOISE[1]`` grey levels at most, the same on every channel, on a share of pixels."""
    share, levels = SPARSE_NOISE
    sel = rng.random(img.shape[:2]) < share
    img[sel] += rng.integers(-levels, levels + 1, size=(int(sel.sum()), 1))


def random_floor_frame(rng: np.random.Generator) -> np.ndarray:
    """A random odometry frame: a rotation about z and an offset on the floor."""
    return make_T(rot_z(float(rng.uniform(-np.pi, np.pi))), [*rng.uniform(-FLOOR_OFFSET_M, FLOOR_OFFSET_M, 2), 0.0])


class MapCopy:
    """One disguise of one top-down image (see the module doc)."""

    def __init__(self, img: np.ndarray, rng: np.random.Generator) -> None:
        img = np.ascontiguousarray(img[..., :3])
        H, W = img.shape[:2]
        self.background = img[0, 0].astype(np.int16)
        ys, xs = np.nonzero(np.abs(img.astype(np.int16) - self.background).max(axis=-1) > 24)
        if len(xs) == 0:
            raise ValueError("a top-down image with nothing drawn on it (all background)")
        margins = (xs.min(), ys.min(), W - 1 - xs.max(), H - 1 - ys.max())  # left, top, right, bottom
        cut = [
            int(rng.integers(-int(MARGIN * s), min(int(MARGIN * s), int(m)) + 1)) for m, s in zip(margins, (W, H, W, H))
        ]
        self.x0, self.y0 = cut[0], cut[1]  # > 0: cropped, < 0: padded
        self.w, self.h = W - cut[0] - cut[2], H - cut[1] - cut[3]
        self.scale = float(rng.uniform(*MAP_SCALE))
        self.out_w, self.out_h = max(8, round(self.w * self.scale)), max(8, round(self.h * self.scale))
        self.gain, self.offset = rng.uniform(*GAIN, 3), rng.uniform(*OFFSET, 3)
        self.src_shape = (H, W)
        self.image = self._draw(img, rng)

    def _draw(self, img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        import cv2

        H, W = img.shape[:2]
        canvas = np.empty((self.h, self.w, 3), np.uint8)
        canvas[:] = self.background.astype(np.uint8)
        sx0, sy0 = max(self.x0, 0), max(self.y0, 0)
        sx1, sy1 = min(self.x0 + self.w, W), min(self.y0 + self.h, H)
        canvas[sy0 - self.y0 : sy1 - self.y0, sx0 - self.x0 : sx1 - self.x0] = img[sy0:sy1, sx0:sx1]
        interp = cv2.INTER_AREA if self.scale < 1 else cv2.INTER_LINEAR
        out = _recolour(cv2.resize(canvas, (self.out_w, self.out_h), interpolation=interp), self.gain, self.offset)
        _sparse_noise(out, rng)
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)

    def grid(self, g: Any) -> list[int]:
        """A point of the 0-999 answer grid of the source image, on the copy's grid."""
        H, W = self.src_shape
        u = (float(g[0]) + 0.5) / 1000.0 * W - self.x0
        v = (float(g[1]) + 0.5) / 1000.0 * H - self.y0
        return [
            int(np.clip(np.floor(u / self.w * 1000.0), 0, 999)),
            int(np.clip(np.floor(v / self.h * 1000.0), 0, 999)),
        ]
