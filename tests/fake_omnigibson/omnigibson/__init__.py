"""A FAKE ``omnigibson`` for tests -- not OmniGibson. OmniGibson cannot be installed on these machines.

It implements only the part of OmniGibson 1.1.1's API that ``envs/omnigibson/sim.py`` calls, with
the documented formats of that version, so the real adapter runs end to end on it unchanged:

* ``Environment(configs=...)`` with ``scene`` (``InteractiveTraversableScene`` only), ``robots`` and
  ``external_sensors`` from the config's ``env.external_sensors``; ``sim.render()``,
  ``sim.step_physics()``; ``clear()``; ``__version__ = "1.1.1"``.
* ``VisionSensor`` (in :mod:`omnigibson.sensors`): a USD camera (x right, y up, looking down -z;
  poses are (position, quaternion x, y, z, w)), ``focal_length`` / ``horizontal_aperture`` (USD
  default 20.955) / ``verticalAperture`` (USD default 15.2908) attributes, and ``get_obs()``
  returning torch tensors -- ``rgb`` (H, W, 4) uint8, ``depth_linear`` (H, W) float32 distance to the
  image plane (inf where nothing is hit), ``seg_instance`` (H, W) int32 ids of a process-wide
  first-seen registry (0 background, 1 unlabelled) -- and ``info["seg_instance"]`` {id: object name}.
  What it shows is the pose as of the last ``sim.render()`` (a pose change needs a render to show).
* Scenes: a procedural apartment per scene name (two rooms, a door, furniture of a few categories,
  ``floors`` / ``walls`` / ``ceilings`` objects), its ``layout/floor_trav_0.png`` and
  ``floor_trav_no_obj_0.png`` written at 0.01 m per pixel in OmniGibson's map convention (square,
  origin at the centre, row index along world +y), and ``trav_map`` built from them as
  ``TraversableMap._load_map`` does. Objects answer ``get_base_aligned_bbox(xy_aligned=True)``,
  ``aabb``, ``visible``.
* Images come from a numpy ray caster over the objects' boxes.

Tests put ``tests/fake_omnigibson`` first on ``sys.path`` and say that they use this fake.
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import tempfile
import zlib

import cv2
import numpy as np
import torch as th

from .sensors import VisionSensor, _registry_id

__version__ = "1.1.1"
FAKE = True
sim = None
_TMP = tempfile.mkdtemp(prefix="fake_og_")  # the scenes' layout/ images
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)

WALL_H, WALL_T = 2.6, 0.1
FURNITURE = [  # category, size (x, y, z), colour
    ("sofa", (0.9, 2.0, 0.8), (150, 60, 60)),
    ("bed", (2.0, 1.5, 0.6), (70, 90, 170)),
    ("bookcase", (0.4, 1.2, 1.8), (120, 80, 40)),
    ("fridge", (0.7, 0.7, 1.8), (220, 220, 230)),
    ("breakfast_table", (1.0, 1.0, 0.75), (180, 140, 90)),
    ("armchair", (0.8, 0.8, 0.9), (60, 140, 80)),
    ("television_stand", (0.5, 1.4, 0.6), (40, 40, 40)),
    ("desk", (0.7, 1.3, 0.75), (160, 110, 70)),
]


def _quat_yaw(yaw: float) -> th.Tensor:
    return th.tensor([0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)], dtype=th.float32)


class FakeObject:
    def __init__(self, name, category, center, size, yaw=0.0, colour=(128, 128, 128), fixed_base=True):
        self.name, self.category, self.fixed_base = name, category, fixed_base
        self.center, self.size, self.yaw = np.array(center, float), np.array(size, float), float(yaw)
        self.colour = np.array(colour, dtype=np.float64)
        self._visible = True

    @property
    def visible(self) -> bool:
        return self._visible

    @visible.setter
    def visible(self, v: bool) -> None:
        self._visible = bool(v)

    @property
    def R(self) -> np.ndarray:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    def get_position_orientation(self, frame="world", clone=True):
        base = self.center - np.array([0.0, 0.0, self.size[2] / 2])
        return th.tensor(base, dtype=th.float32), _quat_yaw(self.yaw)

    def get_base_aligned_bbox(self, link_name=None, visual=False, xy_aligned=False):
        c = th.tensor(self.center, dtype=th.float32)
        return c, _quat_yaw(self.yaw), th.tensor(self.size, dtype=th.float32), th.zeros(3)

    @property
    def aabb(self):
        half = np.abs(self.R) @ (self.size / 2)
        return th.tensor(self.center - half, dtype=th.float32), th.tensor(self.center + half, dtype=th.float32)


class _TravMap:
    """``TraversableMap`` after ``_load_map``: floor_map, map_resolution, map_size, floor_heights."""

    def __init__(self, layout_dir: str, resolution: float, with_objects: bool) -> None:
        img = cv2.imread(
            os.path.join(layout_dir, "floor_trav_0.png" if with_objects else "floor_trav_no_obj_0.png"),
            cv2.IMREAD_GRAYSCALE,
        )
        size = int(img.shape[0] * 0.01 / resolution)
        m = cv2.resize(img, (size, size))
        m[m < 255] = 0
        self.floor_map = [th.tensor(m)]
        self.map_resolution, self.map_size, self.floor_heights = resolution, size, (0.0,)


class Scene:
    def __init__(self, scene_model: str, trav_map_resolution=0.1, trav_map_with_objects=True, **kwargs) -> None:
        self.scene_model = scene_model
        self.pose = th.eye(4)
        rng = np.random.default_rng(zlib.crc32(scene_model.encode()))
        W, H = float(rng.uniform(6.0, 8.0)), float(rng.uniform(4.5, 6.0))
        xd = float(rng.uniform(-0.8, 0.8))  # the interior wall at x = xd, its door at y in [yd - 0.5, yd + 0.5]
        yd = float(rng.uniform(-H / 2 + 1.0, H / 2 - 1.0))
        self.rooms = [(-W / 2, -H / 2, xd, H / 2), (xd, -H / 2, W / 2, H / 2)]
        objs = [
            FakeObject("floors_abcdef_0", "floors", (0, 0, -0.05), (W, H, 0.1), colour=(200, 190, 170)),
            FakeObject("ceilings_abcdef_0", "ceilings", (0, 0, WALL_H + 0.05), (W, H, 0.1), colour=(250, 250, 250)),
        ]
        walls = [
            ((0, -H / 2, WALL_H / 2), (W + WALL_T, WALL_T, WALL_H)),
            ((0, H / 2, WALL_H / 2), (W + WALL_T, WALL_T, WALL_H)),
            ((-W / 2, 0, WALL_H / 2), (WALL_T, H + WALL_T, WALL_H)),
            ((W / 2, 0, WALL_H / 2), (WALL_T, H + WALL_T, WALL_H)),
        ]
        lo, hi = -H / 2, H / 2
        walls.append(((xd, (lo + yd - 0.5) / 2, WALL_H / 2), (WALL_T, yd - 0.5 - lo, WALL_H)))
        walls.append(((xd, (yd + 0.5 + hi) / 2, WALL_H / 2), (WALL_T, hi - yd - 0.5, WALL_H)))
        for i, (c, s) in enumerate(walls):
            objs.append(FakeObject(f"walls_abcdef_{i}", "walls", c, s, colour=(235, 235, 225)))
        placed: list[tuple[float, float, float, float]] = []
        kinds = [FURNITURE[i] for i in rng.permutation(len(FURNITURE))[:6]] + [FURNITURE[0]]  # one category twice
        for k, (cat, size, colour) in enumerate(kinds):
            for _ in range(200):
                yaw = float(rng.integers(4)) * math.pi / 2
                sx, sy = (size[0], size[1]) if int(round(yaw / (math.pi / 2))) % 2 == 0 else (size[1], size[0])
                room = self.rooms[k % 2]
                x = float(rng.uniform(room[0] + sx / 2 + 0.1, room[2] - sx / 2 - 0.1))
                y = float(rng.uniform(room[1] + sy / 2 + 0.1, room[3] - sy / 2 - 0.1))
                rect = (x - sx / 2 - 0.6, y - sy / 2 - 0.6, x + sx / 2 + 0.6, y + sy / 2 + 0.6)
                near_door = abs(x - xd) < sx / 2 + 1.2 and abs(y - yd) < sy / 2 + 1.2
                if near_door or any(
                    not (rect[2] < p[0] or rect[0] > p[2] or rect[3] < p[1] or rect[1] > p[3]) for p in placed
                ):
                    continue
                placed.append((x - sx / 2, y - sy / 2, x + sx / 2, y + sy / 2))
                objs.append(FakeObject(f"{cat}_{k:02d}", cat, (x, y, size[2] / 2), size, yaw, colour))
                break
        self.objects = objs
        self.scene_dir = os.path.join(_TMP, scene_model)
        layout = os.path.join(self.scene_dir, "layout")
        os.makedirs(layout, exist_ok=True)
        for fname, with_objects in (("floor_trav_no_obj_0.png", False), ("floor_trav_0.png", True)):
            cv2.imwrite(os.path.join(layout, fname), self._trav_image(with_objects, W, H))
        self._trav_map = _TravMap(layout, trav_map_resolution, trav_map_with_objects)

    def _trav_image(self, with_objects: bool, W: float, H: float) -> np.ndarray:
        """0.01 m/pixel, OmniGibson's convention: pixel (row, col) covers x = (col - S/2) 0.01, y = (row - S/2) 0.01"""
        S = int(2 * math.ceil(max(W, H) / 2 / 0.01 + 50))
        S += S % 2
        v, u = np.mgrid[0:S, 0:S].astype(np.float64)
        x, y = (u + 0.5 - S / 2) * 0.01, (v + 0.5 - S / 2) * 0.01
        free = np.zeros((S, S), dtype=bool)
        for x0, y0, x1, y1 in self.rooms:
            free |= (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
        for o in self.objects:
            if o.category == "walls" or (with_objects and o.category not in ("floors", "ceilings")):
                d = np.stack([x - o.center[0], y - o.center[1]], -1) @ o.R[:2, :2]
                free &= ~np.all(np.abs(d) <= o.size[:2] / 2, axis=-1)
        return np.where(free, 255, 0).astype(np.uint8)

    @property
    def trav_map(self):
        return self._trav_map

    # the ray caster: smallest positive hit over the visible objects' boxes
    def cast(self, origins: np.ndarray, dirs: np.ndarray, hide: set | None = None):
        t_best = np.full(len(dirs), np.inf)
        who = np.full(len(dirs), -1, dtype=np.int64)
        axis = np.zeros(len(dirs), dtype=np.int64)
        for k, o in enumerate(self.objects):
            if not isinstance(o, FakeObject) or not o.visible or (hide and o.name in hide):
                continue
            R = o.R
            oo, dd = (origins - o.center) @ R, dirs @ R
            with np.errstate(divide="ignore", invalid="ignore"):
                t1, t2 = (-o.size / 2 - oo) / dd, (o.size / 2 - oo) / dd
            tmin, tmax = np.minimum(t1, t2), np.maximum(t1, t2)
            tmin = np.where(np.isnan(tmin), -np.inf, tmin)
            tmax = np.where(np.isnan(tmax), np.inf, tmax)
            near, far = tmin.max(axis=1), tmax.min(axis=1)
            hit = (near <= far) & (far > 1e-6)
            t = np.where(near > 1e-6, near, far)
            better = hit & (t < t_best)
            t_best[better], who[better], axis[better] = t[better], k, np.argmax(tmin, axis=1)[better]
        return t_best, who, axis


class FakeRobot:
    """A base with one camera 0.1 m ahead of its centre, 0.6 m up, looking along the base's +x."""

    category = "agent"

    def __init__(self, name: str, sensor: VisionSensor) -> None:
        self.name = name
        self._pos, self._quat = th.zeros(3), th.tensor([0.0, 0.0, 0.0, 1.0])
        self.sensors = {f"{name}:eyes:Camera:0": sensor}
        self._visible = True
        self.physics_steps = 0

    @property
    def visible(self) -> bool:
        return self._visible

    @visible.setter
    def visible(self, v: bool) -> None:
        self._visible = bool(v)

    def set_position_orientation(self, position=None, orientation=None, frame="world"):
        self._pos = th.as_tensor(position, dtype=th.float32)
        self._quat = th.as_tensor(orientation, dtype=th.float32)
        assert math.isclose(float(th.norm(self._quat)), 1.0, abs_tol=1e-3), "not a unit quaternion"

    def get_position_orientation(self, frame="world", clone=True):
        return self._pos.clone(), self._quat.clone()

    def keep_still(self) -> None:
        pass

    def _sync_camera(self) -> None:  # "physics" carries the camera with the base
        q = self._quat.numpy().astype(np.float64)
        yaw = 2 * math.atan2(q[2], q[3])
        c, s = math.cos(yaw), math.sin(yaw)
        pos = self._pos.numpy() + np.array([0.1 * c, 0.1 * s, 0.6])
        # a USD camera looking along world (c, s, 0), image up = world +z:
        # columns x_usd = (s, -c, 0), y_usd = (0, 0, 1), z_usd = (-c, -s, 0)
        Rm = np.array([[s, 0.0, -c], [-c, 0.0, -s], [0.0, 1.0, 0.0]])
        from .sensors import _quat_from_matrix

        next(iter(self.sensors.values())).set_position_orientation(pos.tolist(), _quat_from_matrix(Rm).tolist())


class _Sim:
    def __init__(self) -> None:
        self.sensors: list[VisionSensor] = []
        self.robots: list[FakeRobot] = []
        self.renders = 0
        self.floor_plane = None

    def render(self) -> None:
        self.renders += 1
        for s in self.sensors:
            s._rendered_pose = s._pose

    def step_physics(self) -> None:
        for r in self.robots:
            r.physics_steps += 1
            r._sync_camera()


class Environment:
    def __init__(self, configs) -> None:
        global sim
        cfg = configs
        scene_cfg = dict(cfg["scene"])
        if scene_cfg.pop("type") != "InteractiveTraversableScene":
            raise ValueError("the fake omnigibson only has InteractiveTraversableScene")
        if sim is None:
            sim = _Sim()
        self.scene = Scene(**scene_cfg)
        self.external_sensors = {}
        for sc in cfg.get("env", {}).get("external_sensors") or []:
            sc = dict(sc)
            assert sc.pop("sensor_type") == "VisionSensor"
            pos, orn, frame = sc.pop("position"), sc.pop("orientation"), sc.pop("pose_frame", "scene")
            sc.pop("include_in_obs", None)
            sensor = VisionSensor(scene=self.scene, sim=sim, **sc.pop("sensor_kwargs", {}), **sc)
            sensor.set_position_orientation(pos, orn, frame=frame)
            self.external_sensors[sensor.name] = sensor
        self.robots = []
        for rc in cfg.get("robots", []):
            kw = rc.get("sensor_config", {}).get("VisionSensor", {}).get("sensor_kwargs", {})
            cam = VisionSensor(
                relative_prim_path=f"/{rc['name']}/eyes/Camera",
                name=f"{rc['name']}:eyes:Camera:0",
                modalities=rc["obs_modalities"],
                scene=self.scene,
                sim=sim,
                **kw,
            )
            robot = FakeRobot(rc["name"], cam)
            self.robots.append(robot)
            sim.robots.append(robot)
            self.scene.objects.append(robot)

    def close(self) -> None:  # a no-op in OmniGibson 1.1.1 too
        pass


def clear(**kwargs) -> None:
    global sim
    sim = None
    _registry_id.clear()
