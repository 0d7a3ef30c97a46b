"""Spatial-perception questions about rendered RGB-D views, answered exactly from the scene truth.

One :class:`View` is a rendered frame with its world pose; :func:`view_questions` poses the
single-image tasks about it and :func:`motion_question` the two-image camera-motion task about a
pair. The camera-frame convention of ``bbox_3d`` (docs/SPATIAL.md, "The 3D box convention"):

* axes: OpenCV's (x right, y down, z forward, metres), with x mirrored for an image whose
  ``fx < 0`` (LIBERO's protocol flip) so that x always points to the image's right;
* field-of-view unified: depth is rescaled to a virtual camera with a vertical field of view of
  ``UNIFIED_FOVY_DEG`` and the same principal point: ``z_u = z * f_u / |f_y|`` with
  ``f_u = (H / 2) / tan(UNIFIED_FOVY_DEG / 2)``; x and y stay metric, so the box centre projects to
  the same pixel in both cameras; sizes stay metric;
* the box's axes are renamed (a signed permutation, sizes permuted with them) to be the ones
  closest to the camera's axes, then ``R_cam_box = R_y(yaw) R_x(pitch) R_z(roll)``, in degrees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import permutations, product
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import camera_yaw, wrap_angle

from .tasks import COLOURS, format_answer

UNIFIED_FOVY_DEG = 60.0
RED = (255, 0, 0)
BLUE = (0, 0, 255)
SINGLE_VIEW = ("depth_order", "depth", "distance", "size", "bbox_3d", "direction", "count", "presence", "colour")
_PALETTE = np.array(list(COLOURS.values()), dtype=np.float64)


@dataclass
class View:
    frame: CameraFrame
    T_world_cam: np.ndarray  # world-from-camera (the frame's own pose may be in an odometry frame)


@dataclass
class Item:
    task: str
    prompt: str  # one "<image>" per image
    images: list[np.ndarray]  # the plain view is shared (``view_image``); marked images are new arrays
    answer: str
    truth: Any
    meta: dict[str, Any] = field(default_factory=dict)


def label(category: str) -> str:
    return category.replace("_", " ")


def mirror(K: np.ndarray) -> np.ndarray:
    """diag(sign fx, 1, 1): from OpenCV camera axes to axes whose x points to the image's right."""
    return np.diag([1.0 if K[0, 0] > 0 else -1.0, 1.0, 1.0])


def depth_scale(K: np.ndarray, height: int) -> float:
    """``f_u / |f_y|``: camera depth -> field-of-view-unified depth."""
    f_u = (height / 2.0) / math.tan(math.radians(UNIFIED_FOVY_DEG) / 2.0)
    return f_u / abs(float(K[1, 1]))


def to_camera(T_world_cam: np.ndarray, p_world: np.ndarray) -> np.ndarray:
    T = np.linalg.inv(T_world_cam)
    return np.asarray(p_world, float) @ T[:3, :3].T + T[:3, 3]


def project(K: np.ndarray, p_cam: np.ndarray) -> np.ndarray:
    p = np.atleast_2d(p_cam)
    return np.stack([K[0, 0] * p[:, 0] / p[:, 2] + K[0, 2], K[1, 1] * p[:, 1] / p[:, 2] + K[1, 2]], axis=1)


_SIGNED_PERMS = [
    P
    for perm in permutations(range(3))
    for signs in product((1.0, -1.0), repeat=3)
    if np.linalg.det(P := np.eye(3)[:, list(perm)] * np.array(signs)) > 0
]


def box_3d(view: View, box) -> list[float]:
    """``[x, y, z_u, x_size, y_size, z_size, roll, pitch, yaw]`` of a world box (module doc)."""
    K, h = view.frame.K, view.frame.height
    M = mirror(K)
    R_cam_world = np.linalg.inv(view.T_world_cam)[:3, :3]
    c = M @ to_camera(view.T_world_cam, box.center)
    R = M @ R_cam_world @ np.asarray(box.R) @ M  # a proper rotation (the box is symmetric under the mirror)
    P = max(_SIGNED_PERMS, key=lambda P: float(np.trace(R @ P)))
    R, size = R @ P, np.abs(P.T) @ np.asarray(box.size, float)
    yaw, pitch, roll = Rotation.from_matrix(R).as_euler("YXZ", degrees=True)
    return [c[0], c[1], c[2] * depth_scale(K, h), *size.tolist(), roll, pitch, yaw]


def present(frame: CameraFrame, truth) -> dict[int, tuple[Any, int]]:
    """instance id -> (object, pixel count) for every scene object with at least one pixel in the view."""
    if frame.instance is None:
        raise ValueError("spatial questions need instance masks (render with segmentation)")
    by_id = {o.instance_id: o for o in truth.objects if o.instance_id is not None}
    ids, counts = np.unique(frame.instance[frame.instance > 0], return_counts=True)
    return {int(i): (by_id[int(i)], int(n)) for i, n in zip(ids, counts) if int(i) in by_id}


def colour_name(pixels: np.ndarray) -> str:
    """The name in ``COLOURS`` nearest (RGB distance) to the median of ``pixels`` (N x 3 uint8)."""
    median = np.median(np.asarray(pixels, dtype=np.float64).reshape(-1, 3), axis=0)
    return list(COLOURS)[int(np.argmin(np.linalg.norm(_PALETTE - median, axis=1)))]


def draw_dot(img: np.ndarray, xy: tuple[int, int], colour: tuple[int, int, int], r: int) -> None:
    h, w = img.shape[:2]
    yy, xx = np.ogrid[:h, :w]
    img[(xx - xy[0]) ** 2 + (yy - xy[1]) ** 2 <= r * r] = colour


class ViewQuestions:
    """The single-image questions about one view (``quota``: task -> how many at most)."""

    def __init__(self, view: View, truth, rng: np.random.Generator, min_pixels: int) -> None:
        self.view, self.truth, self.rng = view, truth, rng
        f = view.frame
        self.min_pixels = int(min_pixels)
        self.present = present(f, truth)
        cats: dict[str, list[int]] = {}
        for iid, (o, _) in self.present.items():
            cats.setdefault(o.category, []).append(iid)
        self.by_category = cats
        self.centres = {iid: to_camera(view.T_world_cam, o.box.center) for iid, (o, _) in self.present.items()}
        # named objects: alone of their category in the view, large enough, in front of the camera
        self.named = [
            cats[c][0]
            for c in sorted(cats)
            if len(cats[c]) == 1
            and self.present[cats[c][0]][1] >= self.min_pixels
            and self.centres[cats[c][0]][2] > 0.05
        ]

    def _image(self) -> np.ndarray:
        return self.view.frame.rgb

    def _pick(self, ids: list[int]) -> int:
        return ids[int(self.rng.integers(len(ids)))]

    def depth_order(self) -> Item | None:
        f = self.view.frame
        h, w = f.height, f.width
        r = max(1, round(min(h, w) / 48))
        valid = f.valid_depth.copy()
        m = r + 2
        valid[:m], valid[-m:], valid[:, :m], valid[:, -m:] = False, False, False, False
        ys, xs = np.nonzero(valid)
        for _ in range(20):
            if len(xs) < 2:
                return None
            i, j = self.rng.integers(len(xs), size=2)
            a, b = (int(xs[i]), int(ys[i])), (int(xs[j]), int(ys[j]))
            da, db = float(f.depth[a[1], a[0]]), float(f.depth[b[1], b[0]])
            if math.hypot(a[0] - b[0], a[1] - b[1]) < 4 * r + 4 or max(da, db) < 1.15 * min(da, db):
                continue
            img = f.rgb.copy()
            draw_dot(img, a, RED, r)
            draw_dot(img, b, BLUE, r)
            q = (
                f"<image>\nPoint A (red) is at pixel ({a[0]}, {a[1]}) and point B (blue) at pixel ({b[0]}, {b[1]}) "
                f"of this {w}x{h} image (x from the left, y from the top). Which point is closer to the camera? "
                "Answer A or B."
            )
            ans = "A" if da < db else "B"
            return Item("depth_order", q, [img], ans, ans, {"points": [list(a), list(b)], "depths": [da, db]})
        return None

    def _named_item(self, task: str) -> Item | None:
        if not self.named:
            return None
        iid = self._pick(self.named)
        o = self.present[iid][0]
        name = label(o.category)
        c = self.centres[iid]
        meta = {"object": o.id, "instance": iid, "label": name}
        if task == "depth":
            q = (
                f"<image>\nHow deep is the {name}: the depth of its centre along the camera's viewing direction, "
                "in metres? Answer with one decimal."
            )
            truth = float(c[2])
        elif task == "distance":
            q = f"<image>\nHow far is the centre of the {name} from the camera, in metres? Answer with one decimal."
            truth = float(np.linalg.norm(c))
        elif task == "size":
            q = f"<image>\nHow long is the longest side of the {name}, in centimetres? Answer with an integer."
            truth = float(100.0 * np.max(o.box.size))
        else:
            q = (
                f"<image>\nGive the 3D bounding box of the {name} in the field-of-view-unified camera frame as JSON: "
                '[{"label": ..., "bbox_3d": [x, y, z, x_size, y_size, z_size, roll, pitch, yaw]}].'
            )
            truth = [float(v) for v in box_3d(self.view, o.box)]
        if task == "size":
            truth = round(truth)
        return Item(task, q, [self._image()], format_answer(task, truth, name), truth, meta)

    def direction(self) -> Item | None:
        K, w = self.view.frame.K, self.view.frame.width
        pairs = [(a, b) for a in self.named for b in self.named if a != b]
        self.rng.shuffle(pairs)
        for a, b in pairs:
            ua, ub = project(K, self.centres[a])[0, 0], project(K, self.centres[b])[0, 0]
            if abs(ua - ub) < 0.1 * w:
                continue
            na, nb = label(self.present[a][0].category), label(self.present[b][0].category)
            q = (
                f"<image>\nFrom the camera's point of view, is the {na} to the left or to the right of the {nb}? "
                "Answer left or right."
            )
            ans = "left" if ua < ub else "right"
            meta = {
                "objects": [self.present[a][0].id, self.present[b][0].id],
                "instances": [a, b],
                "u": [float(ua), float(ub)],
            }
            return Item("direction", q, [self._image()], ans, ans, meta)
        return None

    def count(self) -> Item | None:
        ok = {
            c: len(ids)
            for c, ids in self.by_category.items()
            if all(self.present[i][1] >= self.min_pixels for i in ids)
        }
        ok.update({o.category: 0 for o in self.truth.objects if o.category not in self.by_category})  # none in view
        if not ok:
            return None
        # the count first (uniformly over the counts this view offers), then a category with it: most
        # categories appear once, so drawing the category first would make "1" the answer to learn
        counts = sorted(set(ok.values()))
        n = counts[int(self.rng.integers(len(counts)))]
        cats = sorted(c for c, k in ok.items() if k == n)
        cat = cats[int(self.rng.integers(len(cats)))]
        q = (
            f"<image>\nHow many objects of the category '{label(cat)}' are visible in the image? "
            "Answer with an integer."
        )
        return Item(
            "count",
            q,
            [self._image()],
            str(n),
            n,
            {"category": cat, "instances": sorted(self.by_category.get(cat, []))},
        )

    def presence(self) -> Item | None:
        """Control task: is an object of a category in view (``yes``: one covers >= min_pixels) or not
        (``no``: a category of the scene with no pixel in view), each answer drawn with probability 1/2."""
        seen = sorted(
            c for c, ids in self.by_category.items() if max(self.present[i][1] for i in ids) >= self.min_pixels
        )
        unseen = sorted({o.category for o in self.truth.objects} - set(self.by_category))
        options = [("yes", seen), ("no", unseen)]
        ans, cats = options[int(self.rng.integers(2))]
        if not cats:
            ans, cats = options[1] if ans == "yes" else options[0]
        if not cats:
            return None
        cat = cats[int(self.rng.integers(len(cats)))]
        q = f"<image>\nIs there a {label(cat)} in the image? Answer yes or no."
        return Item("presence", q, [self._image()], ans, ans, {"category": cat})

    def colour(self) -> Item | None:
        """Control task: the colour name of a named object (its pixels' median, :func:`colour_name`)."""
        if not self.named:
            return None
        iid = self._pick(self.named)
        name = label(self.present[iid][0].category)
        ans = colour_name(self.view.frame.rgb[self.view.frame.instance == iid])
        q = f"<image>\nWhat colour is the {name}? Answer with one word: {', '.join(COLOURS)}."
        return Item("colour", q, [self._image()], ans, ans, {"object": self.present[iid][0].id, "instance": iid})

    def ask(self, task: str) -> Item | None:
        if task == "presence":
            return self.presence()
        if task == "colour":
            return self.colour()
        if task == "depth_order":
            return self.depth_order()
        if task == "direction":
            return self.direction()
        if task == "count":
            return self.count()
        return self._named_item(task)


def view_questions(view: View, truth, quota: dict[str, int], rng: np.random.Generator, min_pixels: int) -> list[Item]:
    """Up to ``quota[task]`` single-image questions of each task about ``view`` (fewer where the view
    has nothing to ask about: no named object, no pair far enough apart, ...)."""
    vq = ViewQuestions(view, truth, rng, min_pixels)
    out = []
    for task in SINGLE_VIEW:
        for _ in range(int(quota.get(task, 0))):
            item = vq.ask(task)
            if item is not None:
                out.append(item)
    return out


def motion_question(first: View, second: View) -> Item:
    """How the camera moved from ``first`` to ``second``: forward and left in metres in the first view's
    horizontal frame, and the turn to the left (counter-clockwise seen from above) in degrees."""
    p1, p2 = first.T_world_cam[:3, 3], second.T_world_cam[:3, 3]
    y1, y2 = camera_yaw(first.T_world_cam), camera_yaw(second.T_world_cam)
    d = p2[:2] - p1[:2]
    fwd = float(d @ np.array([math.cos(y1), math.sin(y1)]))
    left = float(d @ np.array([-math.sin(y1), math.cos(y1)]))
    turn = math.degrees(float(wrap_angle(y2 - y1)))
    truth = [round(fwd, 1), round(left, 1), round(turn)]
    q = (
        "Image 1: <image> Image 2: <image>\nThe camera moved from image 1 to image 2. How far did it move forward "
        "and to the left (metres, in image 1's heading) and how many degrees did it turn to the left? "
        "Answer with three numbers: forward left turn."
    )
    return Item("camera_motion", q, [first.frame.rgb, second.frame.rgb], format_answer("camera_motion", truth), truth)
