"""One loaded apartment: its spec, MuJoCo model, navigable grid, planner, renderer and ground truth.

``HouseScene(seed, cfg)`` generates and compiles the apartment (about 0.1-0.3 s) but opens no GL
context; the renderer starts on the first render and :meth:`close` frees it. Everything here is in
the simulator's world frame; the env converts poses to the agent's odometry frame.
"""

from __future__ import annotations

import math
import warnings
from functools import cached_property

import mujoco
import numpy as np

from envs.base import Box, NavGrid, ObjectTruth, Room, SceneTruth
from envs.ground_nav.agent import T_world_base, T_world_cam
from envs.ground_nav.navgrid import Planner, main_component
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import intrinsics_from_fovy, wrap_angle
from spatial_memory.topdown import TopDownFrame

from .catalog import libero_assets_dir
from .config import HouseConfig
from .generator import generate_house
from .spec import GenParams, HouseSpec, ItemSpec
from .mjcf import GROUP_ITEMS, GROUP_STRUCTURE, CameraSpec, CompiledHouse, compile_house, yaw_quat
from .render import HouseRenderer
from .topdown import alignment_iou, geometry_map, scene_frame


class HouseScene:
    def __init__(self, seed: int, cfg: HouseConfig | None = None):
        self.cfg = cfg or HouseConfig()
        self.seed = int(seed)
        use_meshes = self.cfg.use_meshes
        if use_meshes and libero_assets_dir() is None:
            warnings.warn(
                "LIBERO's mesh assets are missing: the house env uses boxes and cylinders instead (run `make setup`)",
                stacklevel=2,
            )
            use_meshes = False
        params = GenParams.from_config(self.cfg)
        self.spec: HouseSpec = generate_house(self.seed, params)
        self.use_meshes = use_meshes
        self.frame: TopDownFrame = scene_frame(self.spec)
        self.camera = CameraSpec(
            self.cfg.width, self.cfg.height, self.cfg.camera_fovy, self.cfg.camera_height, self.cfg.camera_pitch_deg
        )
        self.compiled: CompiledHouse = compile_house(self.spec, self.camera, self.frame, use_meshes)
        self.model = self.compiled.model
        self.data = mujoco.MjData(self.model)
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_camlight(
            self.model, self.data
        )  # camera and light poses: the top-down render needs them before any reset
        self.K = intrinsics_from_fovy(self.cfg.camera_fovy, self.cfg.width, self.cfg.height)
        self.renderer = HouseRenderer(
            self.compiled, self.cfg.width, self.cfg.height, self.frame.width, self.frame.height
        )
        self._pose: np.ndarray | None = None
        self._topdown_cache: dict[str, np.ndarray] = {}
        self.labels: dict[int, str] = {it.instance_id: it.category for it in self.spec.items}
        self.items_by_instance: dict[int, ItemSpec] = {it.instance_id: it for it in self.spec.items}
        self._sample_points: dict[int, np.ndarray] = {}
        half_v = self.cfg.camera_fovy / 2
        half_h = math.degrees(math.atan(math.tan(math.radians(half_v)) * self.cfg.width / self.cfg.height))
        self._half_fov = (half_v - 4.0, half_h - 4.0)  # (vertical, horizontal) degrees, with a margin

    # ------------------------------------------------------------------------------------------
    # navigation
    @cached_property
    def grid(self) -> NavGrid:
        return self.spec.navgrid()

    @cached_property
    def planner(self) -> Planner:
        return Planner(self.grid)

    @cached_property
    def main_component(self) -> np.ndarray:
        """HxW bool: the largest connected free region (every room reaches it; starts and goals live here)."""
        return main_component(self.grid)

    def free_cells_in(self, rect: tuple[float, float, float, float]) -> np.ndarray:
        """Nx2 (row, col) main-component cells whose centres lie in a world rectangle."""
        rc = np.argwhere(self.main_component)
        xy = self.grid.cell_to_world(rc)
        inside = (xy[:, 0] >= rect[0]) & (xy[:, 0] <= rect[2]) & (xy[:, 1] >= rect[1]) & (xy[:, 1] <= rect[3])
        return rc[inside]

    # ------------------------------------------------------------------------------------------
    # agent and rendering
    def set_agent(self, pose: np.ndarray) -> None:
        pose = np.asarray(pose, dtype=np.float64)
        if self._pose is not None and np.array_equal(pose, self._pose):
            return
        self.data.mocap_pos[self.compiled.agent_mocap] = [pose[0], pose[1], 0.0]
        self.data.mocap_quat[self.compiled.agent_mocap] = yaw_quat(float(pose[2]))
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_camlight(self.model, self.data)
        self._pose = pose.copy()

    def T_world_cam(self, pose: np.ndarray) -> np.ndarray:
        return T_world_cam(pose, self.cfg.camera_height, self.cfg.camera_pitch_deg)

    def render_ego(self, pose: np.ndarray, want_rgb: bool = True) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """(rgb, depth metres, instance ids) seen from a world pose [x, y, yaw]."""
        self.set_agent(pose)
        return self.renderer.ego(self.data, want_rgb=want_rgb)

    def camera_frame(self, pose: np.ndarray, T_world_odom: np.ndarray | None = None, step: int = 0) -> CameraFrame:
        """The ego :class:`CameraFrame` at a world pose, its ``T_world_cam`` expressed in the odometry frame
        ``T_world_odom`` (identity: the simulator's world frame)."""
        rgb, depth, inst = self.render_ego(pose)
        T = self.T_world_cam(pose)
        if T_world_odom is not None:
            T = np.linalg.inv(T_world_odom) @ T
        ids = np.flatnonzero(np.bincount(inst.ravel()))
        labels = {int(i): self.labels[int(i)] for i in ids if i > 0}
        return CameraFrame(
            rgb=rgb, depth=depth, K=self.K.copy(), T_world_cam=T, instance=inst, labels=labels, step=step
        )

    def close(self) -> None:
        self.renderer.close()

    # ------------------------------------------------------------------------------------------
    # visibility (ray casting on the MuJoCo model, no rendering)
    def line_of_sight(self, p_from: np.ndarray, p_to: np.ndarray, instance_id: int) -> bool:
        """True when the first thing on the segment p_from -> p_to (walls, furniture, objects) belongs to
        ``instance_id``."""
        vec = np.asarray(p_to, dtype=np.float64) - np.asarray(p_from, dtype=np.float64)
        length = float(np.linalg.norm(vec))
        if length < 1e-9:
            return False
        geomid = np.array([-1], dtype=np.int32)
        groups = np.zeros(6, dtype=np.uint8)
        groups[GROUP_STRUCTURE] = groups[GROUP_ITEMS] = 1
        d = mujoco.mj_ray(
            self.model, self.data, np.asarray(p_from, dtype=np.float64), vec / length, groups, 1, -1, geomid
        )
        return (
            d >= 0
            and d <= length + 1e-3
            and geomid[0] >= 0
            and int(self.compiled.geom_instance[geomid[0]]) == instance_id
        )

    def item_sample_points(self, item: ItemSpec) -> np.ndarray:
        """A few points inside the item's box (centre, upper centre, upper corners pulled inwards, side midpoints)."""
        pts = self._sample_points.get(item.instance_id)
        if pts is None:
            box = item.box()
            half = np.asarray(box.size) / 2
            local = (
                [(0, 0, 0), (0, 0, 0.7)]
                + [(sx * 0.5, sy * 0.5, 0.7) for sx in (-1, 1) for sy in (-1, 1)]
                + [(sx * 0.6, 0, 0.0) for sx in (-1, 1)]
            )
            pts = np.array([box.center + box.R @ (np.array(p) * half) for p in local])
            self._sample_points[item.instance_id] = pts
        return pts

    def visible_from(self, xy: np.ndarray, item: ItemSpec, min_points: int = 2) -> bool:
        """Would a camera at ``xy``, turned towards the item, see at least ``min_points`` of its sample points?

        A point counts when it lies inside the field of view (4 degrees in from each edge) and the first
        thing a ray from the camera meets on the way to it is the item itself.
        """
        cam = np.array([xy[0], xy[1], self.cfg.camera_height])
        pts = self.item_sample_points(item)
        d = pts - cam
        horiz = np.hypot(d[:, 0], d[:, 1])
        elev = np.degrees(np.arctan2(d[:, 2], horiz)) + self.cfg.camera_pitch_deg  # angle above the optical axis
        centre_bearing = math.atan2(pts[0, 1] - xy[1], pts[0, 0] - xy[0])
        bearing = np.degrees(np.abs(wrap_angle(np.arctan2(d[:, 1], d[:, 0]) - centre_bearing)))
        ok = (np.abs(elev) <= self._half_fov[0]) & (bearing <= self._half_fov[1])
        if np.count_nonzero(ok) < min_points:
            return False
        n = 0
        for p in pts[ok]:
            if self.line_of_sight(cam, p, item.instance_id):
                n += 1
                if n >= min_points:
                    return True
        return False

    # ------------------------------------------------------------------------------------------
    # ground truth
    def object_truths(self) -> tuple[ObjectTruth, ...]:
        out = []
        for it in self.spec.items:
            box = it.box()
            out.append(
                ObjectTruth(
                    id=it.id,
                    category=it.category,
                    position=np.asarray(box.center, dtype=np.float64),
                    R=it.R,
                    box=box,
                    instance_id=it.instance_id,
                )
            )
        return tuple(out)

    @cached_property
    def _static_truth(self) -> tuple:
        walls = tuple(w.box() for w in self.spec.walls)
        rooms = tuple(Room(r.name, r.polygon()) for r in self.spec.rooms)
        return self.object_truths(), walls, rooms

    def scene_truth(self, pose: np.ndarray, T_world_odom: np.ndarray) -> SceneTruth:
        objects, walls, rooms = self._static_truth
        return SceneTruth(
            objects=objects,
            bounds=self.spec.bounds,
            T_world_agent=T_world_base(pose),
            walls=walls,
            rooms=rooms,
            navigable=self.grid,
            T_world_odom=np.array(T_world_odom, dtype=np.float64),
        )

    def topdown_map(self, level: str) -> np.ndarray:
        """GT top-down map (uint8 640x512x3 on :attr:`frame`): easy = orthographic render without ceiling,
        medium/hard from geometry. Cached; callers get a copy."""
        if level not in self._topdown_cache:
            if level == "easy":
                rgb, geoms = self.renderer.topdown(self.data)
                self._topdown_cache["easy"] = rgb
                self._topdown_cache["_geoms"] = geoms
            else:
                self._topdown_cache[level] = geometry_map(level, self.spec, self.frame)
        return self._topdown_cache[level].copy()

    def topdown_alignment(self) -> dict[str, float]:
        """IoU of wall / item footprints from geometry vs. the orthographic render's segmentation."""
        self.topdown_map("easy")
        wall_geoms = np.array([g for g in range(self.model.ngeom) if self.model.geom(g).name.startswith("wall_")])
        return alignment_iou(
            self.spec, self.frame, self._topdown_cache["_geoms"], self.compiled.geom_instance, wall_geoms
        )

    def room_of(self, xy: np.ndarray) -> str | None:
        return self.spec.room_at(xy)

    @staticmethod
    def box_of(item: ItemSpec) -> Box:
        return item.box()
