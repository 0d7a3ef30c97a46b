"""FAKE ``omnigibson.sensors.VisionSensor`` (see the package doc): a USD camera over a numpy ray caster.

Rotations here use scipy's ``Rotation`` (quaternions scalar-last, x y z w), an implementation
independent of the adapter's own ``envs/omnigibson/convert.py``.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import torch as th
from scipy.spatial.transform import Rotation

_registry_id: dict[str, int] = {}  # object name -> instance id, first seen first (0 background, 1 unlabelled)


def _quat_from_matrix(R: np.ndarray) -> th.Tensor:
    return th.tensor(Rotation.from_matrix(R).as_quat(), dtype=th.float32)


def _instance_id(name: str) -> int:
    if name not in _registry_id:
        _registry_id[name] = len(_registry_id) + 2
    return _registry_id[name]


class VisionSensor:
    def __init__(
        self,
        relative_prim_path,
        name,
        modalities=("rgb",),
        enabled=True,
        noise=None,
        load_config=None,
        image_height=128,
        image_width=128,
        focal_length=17.0,
        clipping_range=(0.001, 10000000.0),
        viewport_name=None,
        scene=None,
        sim=None,
    ):
        self.name, self.scene, self._sim = name, scene, sim
        self._modalities = set([modalities] if isinstance(modalities, str) else modalities)
        if {"seg_instance", "seg_instance_id"} & self._modalities:
            self._modalities.add("seg_semantic")  # as VisionSensor.__init__ does
        self._h, self._w = int(image_height), int(image_width)
        self._attrs = {"horizontalAperture": 20.955, "verticalAperture": 15.2908, "focalLength": float(focal_length)}
        self._pose = (np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]))
        self._rendered_pose = None
        if sim is not None:
            sim.sensors.append(self)

    # ------------------------------------------------------------------ attributes
    def get_attribute(self, attr):
        return self._attrs[attr]

    def set_attribute(self, attr, val):
        self._attrs[attr] = float(val)

    @property
    def focal_length(self):
        return self._attrs["focalLength"]

    @focal_length.setter
    def focal_length(self, length):
        self._attrs["focalLength"] = float(length)

    @property
    def horizontal_aperture(self):
        return self._attrs["horizontalAperture"]

    @property
    def image_height(self):
        return self._h

    @property
    def image_width(self):
        return self._w

    # ------------------------------------------------------------------ pose
    def set_position_orientation(self, position=None, orientation=None, frame="world"):
        assert frame in ("world", "parent", "scene")
        p = np.asarray(th.as_tensor(position, dtype=th.float32), dtype=np.float64)
        q = np.asarray(th.as_tensor(orientation, dtype=th.float32), dtype=np.float64)
        assert math.isclose(float(np.linalg.norm(q)), 1.0, abs_tol=1e-3), f"{orientation} is not a unit quaternion"
        if frame == "scene":
            T = self.scene.pose.numpy().astype(np.float64)
            R = T[:3, :3] @ Rotation.from_quat(q).as_matrix()
            p, q = T[:3, :3] @ p + T[:3, 3], Rotation.from_matrix(R).as_quat()
        self._pose = (p, q)

    def get_position_orientation(self, frame="world", clone=True):
        return th.tensor(self._pose[0], dtype=th.float32), th.tensor(self._pose[1], dtype=th.float32)

    # ------------------------------------------------------------------ images
    def get_obs(self):
        if self._rendered_pose is None:
            raise RuntimeError("fake VisionSensor: nothing rendered yet (call og.sim.render())")
        p, q = self._rendered_pose
        R = Rotation.from_quat(q).as_matrix()  # world from USD camera
        H, W = self._h, self._w
        f = self._attrs["focalLength"]
        fx, fy = W * f / self._attrs["horizontalAperture"], H * f / self._attrs["verticalAperture"]
        v, u = np.mgrid[0:H, 0:W].astype(np.float64)
        d_cam = np.stack([(u + 0.5 - W / 2) / fx, -(v + 0.5 - H / 2) / fy, -np.ones_like(u)], -1).reshape(-1, 3)
        d_world = d_cam @ R.T  # one unit of t is one metre along the optical axis
        t, who, axis = self.scene.cast(np.broadcast_to(p, d_world.shape), d_world)
        objs = self.scene.objects
        hit = who >= 0
        rgb = np.zeros((H * W, 4), dtype=np.uint8)
        rgb[:, 3] = 255
        seg = np.zeros(H * W, dtype=np.int32)
        sem = np.zeros(H * W, dtype=np.int32)
        info_inst, info_sem = {0: "background"}, {}
        shade = np.array([0.8, 0.9, 1.0])
        for k in np.unique(who[hit]):
            sel = who == k
            o = objs[int(k)]
            pts = p + d_world[sel] * t[sel, None]
            texture = 0.92 + 0.08 * ((np.floor(pts[:, 0] * 2) + np.floor(pts[:, 1] * 2)) % 2)  # 0.5 m checks
            rgb[sel, :3] = np.clip(o.colour[None] * (shade[axis[sel]] * texture)[:, None], 0, 255).astype(np.uint8)
            iid = _instance_id(o.name)
            seg[sel] = iid
            info_inst[iid] = o.name
            sid = zlib.crc32(o.category.encode()) & 0x7FFFFFFF
            sem[sel] = sid
            info_sem[sid] = o.category
        depth = np.where(hit, t, np.inf).astype(np.float32)
        present = set(np.unique(seg).tolist())
        obs = {
            "rgb": th.from_numpy(rgb.reshape(H, W, 4)),
            "depth_linear": th.from_numpy(depth.reshape(H, W)),
            "seg_instance": th.from_numpy(seg.reshape(H, W)),
            "seg_semantic": th.from_numpy(sem.reshape(H, W)),
        }
        info = {"seg_instance": {k: v for k, v in info_inst.items() if k in present}, "seg_semantic": info_sem}
        return {m: obs[m] for m in self._modalities if m in obs}, {m: info[m] for m in info if m in self._modalities}
