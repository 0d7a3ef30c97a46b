"""The thin boundary around OmniGibson 1.1.1: the only module of ours that touches ``omnigibson``.

:class:`OmniGibsonSim` loads one BEHAVIOR-1K scene (``og.Environment`` with an
``InteractiveTraversableScene``, a ``DummyTask``, one external ``VisionSensor`` and, when asked, one
of OmniGibson's robots), moves cameras and robots kinematically (poses are set, physics is not
stepped for a camera agent) and hands back plain numpy data: raw sensor arrays, the traversable map,
layout images, object records. Every conversion into our contracts lives in :mod:`.convert`, pure
and tested; nothing here reasons about frames beyond calling it.

The API used, all of OmniGibson 1.1.1 (files of that version): ``og.Environment(configs=...)`` with
``env.external_sensors`` (``envs/env_base.py``, ``_load_external_sensors``: ``sensor_type``,
``name``, ``relative_prim_path``, ``modalities``, ``sensor_kwargs``, ``position``, ``orientation``,
``pose_frame``, ``include_in_obs``), ``env.scene`` / ``env.robots``; ``og.sim.render()`` and
``og.sim.step_physics()`` (``simulator.py``; a stage change needs about two renders to show,
``Simulator.step``'s note); ``VisionSensor.get_obs()``, ``focal_length``, ``horizontal_aperture``,
``set_attribute``, ``set_position_orientation`` / ``get_position_orientation`` (``sensors/``,
``prims/xform_prim.py``); ``scene.trav_map.floor_map`` / ``map_resolution``, ``scene.scene_dir``,
``scene.pose``, ``scene.objects`` (``scenes/``, ``maps/``); ``obj.name``, ``obj.category``,
``obj.get_base_aligned_bbox(xy_aligned=True)``, ``obj.aabb``, ``obj.visible``; ``robot.sensors``,
``robot.set_position_orientation``, ``robot.keep_still``; ``og.clear()`` (``__init__.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from envs.truth import Box

from .config import OmniGibsonConfig
from .convert import (
    box_from_aabb,
    box_from_bbox,
    cv_camera_from_usd,
    focal_length_for_hfov,
    frame_to_scene,
    intrinsics,
    pose_to_T,
    scene_to_world,
    to_numpy,
    usd_camera_from_cv,
    vertical_aperture_for,
    T_to_pose,
)

TARGET_VERSION = "1.1.1"
CAMERA = "gst_camera"  # the external camera: the ego view of the camera agent, and the top-down views
MODALITIES = ["rgb", "depth_linear", "seg_instance"]  # seg_semantic is added by VisionSensor itself
# OmniGibson 1.1.1 utils/constants.py STRUCTURE_CATEGORIES (building structure), plus the robot category
STRUCTURE = frozenset({"floors", "walls", "ceilings", "lawn", "driveway", "fence", "roof", "background"})
ROBOT_CATEGORY = "agent"  # robots/robot_base.py m.ROBOT_CATEGORY
HIDDEN_FROM_ABOVE = ("ceilings", "roof")  # hidden while the easy top-down map is rendered

INSTALL = f"""env=omnigibson needs OmniGibson {TARGET_VERSION} with NVIDIA Isaac Sim 4.1 (an RTX GPU, Linux,
Python 3.10), which pip alone cannot install. Steps (docs/omnigibson.md):
  conda create -n omnigibson python=3.10 pytorch torchvision torchaudio pytorch-cuda=12.1 "numpy<2" -c pytorch -c nvidia
  conda activate omnigibson
  pip install omnigibson=={TARGET_VERSION}
  python -m omnigibson.install    # Isaac Sim 4.1 wheels from NVIDIA's index, the BEHAVIOR-1K dataset and assets
  pip install --ignore-requires-python --no-deps -e .    # this project, in that environment
  pip install hydra-core==1.3.8 gymnasium numba tqdm msgpack websockets"""


class OmniGibsonUnavailable(ValueError):
    """OmniGibson cannot be imported here (the message carries the install steps)."""


def omnigibson_installed() -> bool:
    return importlib.util.find_spec("omnigibson") is not None


def require_omnigibson() -> None:
    """:class:`OmniGibsonUnavailable` now, with the install steps, unless ``omnigibson`` can be found."""
    if not omnigibson_installed():
        raise OmniGibsonUnavailable("OmniGibson is not installed.\n" + INSTALL)


def import_omnigibson(headless: bool = True):
    """``import omnigibson`` (headless by default), or :class:`OmniGibsonUnavailable` with the install steps."""
    require_omnigibson()
    if headless:
        os.environ.setdefault("OMNIGIBSON_HEADLESS", "1")  # read by omnigibson/macros.py at import
    try:
        og = importlib.import_module("omnigibson")
    except Exception as exc:  # noqa: BLE001 - any failure inside Isaac Sim's import chain means the same thing
        raise OmniGibsonUnavailable(f"importing omnigibson failed ({type(exc).__name__}: {exc}).\n" + INSTALL) from exc
    version = str(getattr(og, "__version__", "unknown"))
    if version.split(".")[:2] != TARGET_VERSION.split(".")[:2]:
        warnings.warn(
            f"omnigibson {version} is installed; this adapter is written against {TARGET_VERSION}", stacklevel=2
        )
    return og


def env_config(cfg: OmniGibsonConfig, scene: str) -> dict[str, Any]:
    """The ``og.Environment`` config of one scene (plain data; see the module doc for the keys)."""
    sensor_kwargs = {"image_height": cfg.height, "image_width": cfg.width}
    out: dict[str, Any] = {
        "env": {
            "external_sensors": [
                {
                    "sensor_type": "VisionSensor",
                    "name": CAMERA,
                    "relative_prim_path": f"/{CAMERA}",
                    "modalities": list(MODALITIES),
                    "sensor_kwargs": sensor_kwargs,
                    "position": [0.0, 0.0, cfg.camera_height],
                    "orientation": [0.0, 0.0, 0.0, 1.0],
                    "pose_frame": "scene",
                    "include_in_obs": False,
                }
            ]
        },
        "scene": {
            "type": "InteractiveTraversableScene",
            "scene_model": scene,
            "trav_map_resolution": cfg.grid_resolution,
            "default_erosion_radius": cfg.agent_radius,
            "trav_map_with_objects": True,
            "not_load_object_categories": list(cfg.not_load_object_categories) or None,
        },
        "robots": [],
        "task": {"type": "DummyTask"},
    }
    if cfg.robot is not None:
        out["robots"] = [
            {
                "type": cfg.robot,
                "name": "robot0",
                "obs_modalities": list(MODALITIES),
                "sensor_config": {"VisionSensor": {"sensor_kwargs": dict(sensor_kwargs)}},
            }
        ]
    return out


@dataclass(frozen=True, eq=False)
class ObjectRecord:
    """One object of the scene's registry, in the world frame of the simulator."""

    name: str
    category: str
    box: Box
    fixed_base: bool


@dataclass(frozen=True, eq=False)
class RawView:
    """What a camera gave, as numpy, and where it was (world frame, OpenCV axes)."""

    rgb: np.ndarray  # HxWx4 uint8 (RGBA)
    depth: np.ndarray  # HxW float32 metres
    seg: np.ndarray  # HxW int32
    seg_info: dict[int, str]
    T_world_cam: np.ndarray  # 4x4, OpenCV axes
    K: np.ndarray


class OmniGibsonSim:
    """One loaded scene (see the module doc). World poses here are the simulator's; the scene's own frame
    (``T_world_scene``) is what the env calls its world."""

    def __init__(self, cfg: OmniGibsonConfig, scene: str, og: Any = None) -> None:
        self.cfg, self.scene_name = cfg, scene
        self.og = og if og is not None else import_omnigibson(cfg.headless)
        self.env = self.og.Environment(configs=env_config(cfg, scene))
        self.scene = self.env.scene
        self.camera = self.env.external_sensors[CAMERA]
        self.robot = self.env.robots[0] if cfg.robot is not None else None
        self._setup_camera(self.camera, cfg.camera_hfov_deg)
        self.ego = self.camera
        if self.robot is not None:
            vision = importlib.import_module("omnigibson.sensors").VisionSensor
            cams = sorted((s for s in self.robot.sensors.values() if isinstance(s, vision)), key=lambda s: s.name)
            if not cams:
                raise ValueError(f"robot {cfg.robot!r} has no camera (VisionSensor) to see with")
            self.ego = cams[0]
            self._setup_camera(self.ego, None)
        self.skipped_objects: list[str] = []

    # ------------------------------------------------------------------ cameras
    def _setup_camera(self, cam: Any, hfov_deg: float | None) -> None:
        """Square pixels (verticalAperture from the horizontal one) and, for our camera, the configured FOV."""
        ap = float(cam.horizontal_aperture)
        if hfov_deg is not None:
            cam.focal_length = focal_length_for_hfov(hfov_deg, ap)
        cam.set_attribute("verticalAperture", vertical_aperture_for(ap, self.cfg.width, self.cfg.height))

    def K(self, cam: Any) -> np.ndarray:
        return intrinsics(float(cam.focal_length), float(cam.horizontal_aperture), self.cfg.width, self.cfg.height)

    @property
    def T_world_scene(self) -> np.ndarray:
        return to_numpy(self.scene.pose, np.float64).reshape(4, 4)

    def _settle(self) -> None:
        for _ in range(self.cfg.render_settle):
            self.og.sim.render()

    def _read(self, cam: Any) -> RawView:
        obs, info = cam.get_obs()
        pos, quat = cam.get_position_orientation()
        T_world = cv_camera_from_usd(pose_to_T(to_numpy(pos), to_numpy(quat)))
        return RawView(
            rgb=to_numpy(obs["rgb"]),
            depth=to_numpy(obs["depth_linear"]),
            seg=to_numpy(obs["seg_instance"]),
            seg_info={int(k): str(v) for k, v in info["seg_instance"].items()},
            T_world_cam=T_world,
            K=self.K(cam),
        )

    def view_from(self, T_scene_cam: np.ndarray) -> RawView:
        """Our external camera placed at a scene-frame OpenCV pose, rendered and read."""
        T_world_usd = usd_camera_from_cv(scene_to_world(self.T_world_scene, T_scene_cam))
        pos, quat = T_to_pose(T_world_usd)
        self.camera.set_position_orientation(position=pos.tolist(), orientation=quat.tolist())
        self._settle()
        return self._read(self.camera)

    def view_from_robot(self, T_scene_base: np.ndarray) -> RawView:
        """The robot teleported to a scene-frame base pose (one physics step carries it to the renderer),
        its camera rendered and read; the camera pose is read back from the sensor."""
        pos, quat = T_to_pose(scene_to_world(self.T_world_scene, T_scene_base))
        self.robot.set_position_orientation(position=pos.tolist(), orientation=quat.tolist())
        self.robot.keep_still()
        self.og.sim.step_physics()
        self._settle()
        return self._read(self.ego)

    def in_scene(self, T_world_x: np.ndarray) -> np.ndarray:
        return frame_to_scene(self.T_world_scene, T_world_x)

    @contextmanager
    def hidden(self, categories: tuple[str, ...] = HIDDEN_FROM_ABOVE) -> Iterator[None]:
        """Objects of ``categories`` (and the robot) invisible for the duration (the easy map's renders)."""
        objs = [o for o in self.scene.objects if o.category in categories]
        if self.robot is not None:
            objs.append(self.robot)
        was = [bool(o.visible) for o in objs]
        try:
            for o in objs:
                o.visible = False
            yield
        finally:
            for o, v in zip(objs, was):
                o.visible = v

    # ------------------------------------------------------------------ scene data
    def objects(self) -> list[ObjectRecord]:
        """Every non-structure object with a box (base-aligned, else the aabb); the others are listed in
        ``skipped_objects``."""
        out, self.skipped_objects = [], []
        for obj in self.scene.objects:
            cat = str(obj.category)
            if cat in STRUCTURE or cat == ROBOT_CATEGORY:
                continue
            try:
                center, quat, extent, _ = obj.get_base_aligned_bbox(xy_aligned=True)
                box = box_from_bbox(center, quat, extent)
            except Exception:  # noqa: BLE001 - objects without links (lights) have no base-aligned box
                try:
                    box = box_from_aabb(*obj.aabb)
                except Exception:  # noqa: BLE001
                    self.skipped_objects.append(str(obj.name))
                    continue
            if float(np.prod(box.size)) <= 1e-6:  # virtual objects (OmniGibson gives lights a 2 mm aabb)
                self.skipped_objects.append(str(obj.name))
                continue
            out.append(ObjectRecord(str(obj.name), cat, box, bool(getattr(obj, "fixed_base", False))))
        return out

    def trav_map(self) -> tuple[np.ndarray, float]:
        """Floor 0 of the scene's traversable map (with objects) and its resolution."""
        tm = self.scene.trav_map
        if not tm.floor_map:
            raise ValueError(f"scene {self.scene_name} has no traversable map (layout/floor_trav_0.png)")
        return to_numpy(tm.floor_map[0]).astype(np.uint8), float(tm.map_resolution)

    def layout_image(self, filename: str) -> np.ndarray:
        """A grayscale image of the scene's ``layout/`` folder (e.g. ``floor_trav_no_obj_0.png``, 0.01 m/px)."""
        import cv2

        path = os.path.join(str(self.scene.scene_dir), "layout", filename)
        img = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
        if img is None:
            raise ValueError(f"scene {self.scene_name}: cannot read {path}")
        return img

    def close(self) -> None:
        """Clear the stage (``og.clear()``: the next scene of this process starts from a fresh simulator)."""
        self.og.clear()
