"""Synthetic scenes of boxes and a pinhole ray caster, in numpy: ground truth for tests, benchmarks
and the synthetic noise sweep (``scripts/noise_sweep.py``), with no simulator.

A scene is a list of gravity-aligned boxes (walls, floor, ceiling and objects). ``render`` casts one
ray per pixel (OpenCV camera, pixel centres at integers) and returns a :class:`CameraFrame` with
z-depth, colour (flat per box, shaded a little by the face normal so the easy map has texture) and
instance masks (objects carry their instance id; structure has id 0). For localisation and map
registration: ``topdown`` draws ground-truth maps of the three levels on any frame, ``transformed``
moves the whole scene (a rotated, shifted world), ``free_positions`` samples camera positions, and
:func:`reframe` / :func:`odometry_transform` put frames in a random odometry frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .draw import box_footprint, compose_level, polygon_mask
from .frame import CameraFrame
from .geometry import box_distance, intrinsics_from_fovy, make_T, pose_from_xy_yaw, rot_z
from .topdown import TopDownFrame


@dataclass(frozen=True, eq=False)
class SceneBox:
    center: np.ndarray
    size: np.ndarray
    yaw: float = 0.0
    colour: tuple[int, int, int] = (200, 200, 200)
    category: str = "wall"
    instance_id: int = 0  # 0 = structure (not an object)

    @property
    def R(self) -> np.ndarray:
        return rot_z(self.yaw)


@dataclass(eq=False)
class BoxScene:
    boxes: list[SceneBox]
    bounds: tuple[float, float, float, float]  # xmin, ymin, xmax, ymax of the floor
    labels: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labels = {b.instance_id: b.category for b in self.boxes if b.instance_id > 0}

    def objects(self) -> list[SceneBox]:
        return [b for b in self.boxes if b.instance_id > 0]

    def object(self, category: str) -> SceneBox:
        found = [b for b in self.objects() if b.category == category]
        if len(found) != 1:
            raise KeyError(f"{len(found)} objects of category {category!r}")
        return found[0]

    def walls(self) -> list[SceneBox]:
        return [b for b in self.boxes if b.category == "wall"]

    def raycast(self, origin: np.ndarray, dirs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(t, box index, face axis) of the first hit of each ray ``origin + t dirs`` (t = inf, -1 if none)."""
        n = len(dirs)
        t_best = np.full(n, np.inf)
        which = np.full(n, -1, dtype=np.int64)
        axis = np.zeros(n, dtype=np.int64)
        for b, box in enumerate(self.boxes):
            R = box.R
            o_box = (np.asarray(origin, dtype=np.float64) - box.center) @ R
            d_box = dirs @ R
            half = np.asarray(box.size, dtype=np.float64) / 2
            with np.errstate(divide="ignore", invalid="ignore"):
                inv = 1.0 / d_box
                t1 = (-half - o_box) * inv
                t2 = (half - o_box) * inv
            t_near = np.minimum(t1, t2)
            t_near = np.where(np.isnan(t_near), -np.inf, t_near)
            t_far = np.where(np.isnan(t1), np.inf, np.maximum(t1, t2))
            t_enter = t_near.max(axis=1)
            t_exit = t_far.min(axis=1)
            hit = (t_enter <= t_exit) & (t_enter > 1e-9) & (t_enter < t_best)
            t_best[hit] = t_enter[hit]
            which[hit] = b
            axis[hit] = t_near[hit].argmax(axis=1)
        return t_best, which, axis

    def render(self, T_world_cam: np.ndarray, K: np.ndarray, width: int, height: int, step: int = 0) -> CameraFrame:
        v, u = np.mgrid[0:height, 0:width].astype(np.float64)
        rays_cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], axis=-1).reshape(-1, 3)
        dirs = rays_cam @ T_world_cam[:3, :3].T  # z_cam component 1: t is the z-depth
        t, which, axis = self.raycast(T_world_cam[:3, 3], dirs)
        depth = np.where(np.isfinite(t), t, 0.0).astype(np.float32).reshape(height, width)
        colours = np.array([b.colour for b in self.boxes] + [(0, 0, 0)], dtype=np.float64)
        shade = np.array([0.85, 0.92, 1.0])[axis]
        rgb = (colours[which] * shade[:, None]).clip(0, 255).astype(np.uint8).reshape(height, width, 3)
        ids = np.array([b.instance_id for b in self.boxes] + [0], dtype=np.int32)
        instance = ids[which].reshape(height, width)
        return CameraFrame(
            rgb=rgb, depth=depth, K=K, T_world_cam=T_world_cam, instance=instance, labels=dict(self.labels), step=step
        )

    # ---------------------------------------------------------------------------- ground truth for
    # localisation and map registration
    def transformed(self, T_new_old: np.ndarray) -> "BoxScene":
        """The same scene moved by a rotation about z and a translation (``T_new_old`` 4x4; only its
        yaw and translation are used): e.g. the world as seen in an odometry frame."""
        yaw = float(np.arctan2(T_new_old[1, 0], T_new_old[0, 0]))
        R, t = rot_z(yaw), np.asarray(T_new_old, dtype=np.float64)[:3, 3]
        boxes = [
            SceneBox(R @ b.center + t, b.size.copy(), b.yaw + yaw, b.colour, b.category, b.instance_id)
            for b in self.boxes
        ]
        corners = np.array([[x, y, 0.0] for x in self.bounds[0::2] for y in self.bounds[1::2]]) @ R.T + t
        lo, hi = corners[:, :2].min(axis=0), corners[:, :2].max(axis=0)
        return BoxScene(boxes, (float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])))

    def topdown(self, level: str, frame: TopDownFrame) -> np.ndarray:
        """Ground-truth top-down map (uint8 HxWx3) of ``level`` on ``frame``, as the environments draw
        theirs: medium/hard from the wall and object footprints (:func:`.draw.compose_level`), easy
        from an orthographic render from above without the ceiling (the top face's colour)."""
        walls = polygon_mask(frame, [box_footprint(b.center, b.size, b.R) for b in self.walls()])
        if level in ("medium", "hard"):
            objects = polygon_mask(frame, [box_footprint(b.center, b.size, b.R) for b in self.objects()])
            return compose_level(level, walls, objects)
        xy = frame.pixel_centres_world().reshape(-1, 2)
        top = max(float(b.center[2] + b.size[2] / 2) for b in self.boxes) + 1.0
        visible = BoxScene([b for b in self.boxes if b.category != "ceiling"], self.bounds)
        colour = np.full((len(xy), 3), 255, dtype=np.uint8)
        for k in range(0, len(xy), 65536):  # rays straight down, one per pixel centre
            o = np.concatenate([xy[k : k + 65536], np.full((min(65536, len(xy) - k), 1), top)], axis=1)
            t, which = visible.raycast_parallel(o, np.array([0.0, 0.0, -1.0]))
            hit = which >= 0
            colour[k : k + 65536][hit] = np.array([visible.boxes[w].colour for w in which[hit]], dtype=np.uint8)
        return compose_level("easy", walls, None, colour.reshape(frame.height, frame.width, 3))

    def raycast_parallel(self, origins: np.ndarray, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(t, box index) of the first hit of parallel rays ``origins + t direction`` (t = inf, -1 if none)."""
        n = len(origins)
        t_best = np.full(n, np.inf)
        which = np.full(n, -1, dtype=np.int64)
        for b, box in enumerate(self.boxes):
            R = box.R
            o_box = (origins - box.center) @ R
            d_box = np.asarray(direction, dtype=np.float64) @ R
            half = np.asarray(box.size, dtype=np.float64) / 2
            with np.errstate(divide="ignore", invalid="ignore"):
                inv = 1.0 / d_box
                t1 = (-half - o_box) * inv
                t2 = (half - o_box) * inv
            t_near = np.where(np.isnan(np.minimum(t1, t2)), -np.inf, np.minimum(t1, t2)).max(axis=1)
            t_far = np.where(np.isnan(t1), np.inf, np.maximum(t1, t2)).min(axis=1)
            hit = (t_near <= t_far) & (t_near > 1e-9) & (t_near < t_best)
            t_best[hit] = t_near[hit]
            which[hit] = b
        return t_best, which

    def free_positions(self, n: int, rng: np.random.Generator, clearance: float = 0.35) -> np.ndarray:
        """n random floor positions (Nx2) at least ``clearance`` metres from every wall and object footprint."""
        obstacles = [b for b in self.boxes if b.category not in ("floor", "ceiling")]
        out = []
        x0, y0, x1, y1 = self.bounds
        for _ in range(200 * n):
            if len(out) == n:
                break
            p = rng.uniform([x0, y0], [x1, y1])
            if all(box_distance(p, b.center, b.size, b.yaw) >= clearance for b in obstacles):
                out.append(p)
        return np.array(out).reshape(-1, 2)


def reframe(frame: CameraFrame, T_new_world: np.ndarray) -> CameraFrame:
    """The same frame with its pose expressed in another frame (e.g. the robot's odometry frame)."""
    return CameraFrame(
        rgb=frame.rgb,
        depth=frame.depth,
        K=frame.K,
        T_world_cam=np.asarray(T_new_world) @ frame.T_world_cam,
        instance=frame.instance,
        labels=frame.labels,
        step=frame.step,
    )


def odometry_transform(rng: np.random.Generator, max_offset: float = 5.0) -> np.ndarray:
    """A random T_odom_world: any yaw, a translation up to ``max_offset`` metres in x and y."""
    return make_T(rot_z(rng.uniform(-np.pi, np.pi)), [*rng.uniform(-max_offset, max_offset, 2), 0.0])


def _wall(x0: float, y0: float, x1: float, y1: float, height: float, thickness: float = 0.1) -> SceneBox:
    """A wall along the segment (x0, y0)-(x1, y1), axis-aligned segments only."""
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    sx = abs(x1 - x0) + thickness
    sy = abs(y1 - y0) + thickness
    return SceneBox(
        center=np.array([cx, cy, height / 2]), size=np.array([sx, sy, height]), colour=(235, 230, 220), category="wall"
    )


def apartment_scene(width: float = 10.0, depth: float = 8.0, wall_height: float = 2.5) -> BoxScene:
    """Two rooms (a partition wall with a 1 m door) with furniture, floor at z = 0 and a ceiling."""
    W, D, h = width, depth, wall_height
    px = 0.6 * W  # partition wall x
    boxes = [
        SceneBox(
            np.array([W / 2, D / 2, -0.05]), np.array([W + 0.4, D + 0.4, 0.1]), colour=(150, 110, 80), category="floor"
        ),
        SceneBox(
            np.array([W / 2, D / 2, h + 0.05]),
            np.array([W + 0.4, D + 0.4, 0.1]),
            colour=(250, 250, 250),
            category="ceiling",
        ),
        _wall(0, 0, W, 0, h),
        _wall(0, D, W, D, h),
        _wall(0, 0, 0, D, h),
        _wall(W, 0, W, D, h),
        _wall(px, 0, px, D / 2 - 0.5, h),
        _wall(px, D / 2 + 0.5, px, D, h),
    ]
    furniture = [
        ("sofa", (1.5, 1.2, 0.4), (2.0, 0.9, 0.8), 0.0, (60, 90, 160)),
        ("table", (3.2, 4.0, 0.375), (1.2, 0.8, 0.75), 0.3, (120, 80, 40)),
        ("bed", (8.0, 2.0, 0.275), (1.6, 2.0, 0.55), 0.0, (200, 60, 60)),
        ("wardrobe", (9.5, 6.5, 1.0), (0.6, 1.2, 2.0), 0.0, (90, 60, 30)),
        ("plant", (1.0, 7.0, 0.5), (0.4, 0.4, 1.0), 0.0, (40, 150, 60)),
        ("tv_stand", (4.0, 7.6, 0.3), (1.4, 0.4, 0.6), 0.0, (30, 30, 30)),
        ("chair", (4.2, 3.0, 0.45), (0.5, 0.5, 0.9), 0.8, (170, 140, 60)),
        ("desk", (7.5, 7.4, 0.375), (1.2, 0.6, 0.75), 0.0, (160, 160, 170)),
    ]
    for iid, (cat, c, s, yaw, col) in enumerate(furniture, start=1):
        boxes.append(SceneBox(np.array(c, dtype=np.float64), np.array(s, dtype=np.float64), yaw, col, cat, iid))
    return BoxScene(boxes, (0.0, 0.0, W, D))


def tabletop_scene() -> BoxScene:
    """A LIBERO-sized scene: a 1.0 x 0.8 m table (structure, top at z = 0.9 m) with four small objects."""
    boxes = [
        SceneBox(np.array([0.0, 0.0, -0.05]), np.array([4.0, 4.0, 0.1]), colour=(120, 120, 120), category="floor"),
        SceneBox(np.array([0.0, 0.0, 0.45]), np.array([1.0, 0.8, 0.9]), colour=(150, 100, 60), category="table"),
    ]
    items = [
        ("bowl", (-0.2, 0.1, 0.93), (0.12, 0.12, 0.06), 0.0, (30, 30, 30)),
        ("plate", (0.2, -0.15, 0.91), (0.18, 0.18, 0.02), 0.0, (240, 240, 240)),
        ("mug", (0.25, 0.2, 0.95), (0.08, 0.08, 0.1), 0.0, (200, 40, 40)),
        ("box", (-0.25, -0.2, 0.95), (0.1, 0.15, 0.1), 0.5, (40, 160, 220)),
    ]
    for iid, (cat, c, s, yaw, col) in enumerate(items, start=1):
        boxes.append(SceneBox(np.array(c, dtype=np.float64), np.array(s, dtype=np.float64), yaw, col, cat, iid))
    return BoxScene(boxes, (-0.6, -0.5, 0.6, 0.5))


def apartment_tour(n_frames: int, height: float = 1.5, pitch_down_deg: float = 10.0) -> list[np.ndarray]:
    """Camera poses (T_world_cam) of a walk through both rooms of :func:`apartment_scene`, turning
    on the spot at each waypoint so every wall and object is seen."""
    waypoints = np.array([[2.5, 2.2], [4.5, 5.5], [5.6, 4.0], [7.5, 4.5], [8.2, 5.2], [5.6, 4.0], [2.5, 5.8]])
    poses = []
    per_wp = max(n_frames // len(waypoints), 1)
    for k in range(n_frames):
        w = min(k // per_wp, len(waypoints) - 1)
        frac = (k - w * per_wp) / per_wp
        yaw = 2 * np.pi * frac + 0.7 * w
        x, y = waypoints[w]
        poses.append(pose_from_xy_yaw(x, y, yaw, height, np.radians(pitch_down_deg)))
    return poses


def default_camera(width: int = 256, height: int = 256, fovy_deg: float = 90.0) -> np.ndarray:
    """The embedded apartments' head camera intrinsics (fovy 90, square pixels)."""
    return intrinsics_from_fovy(fovy_deg, width, height)
