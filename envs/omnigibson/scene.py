"""One loaded BEHAVIOR-1K scene in our terms: navigable grid, objects with stable instance ids, maps, frames.

``OGScene`` is built from an :class:`~.sim.OmniGibsonSim` and converts everything it reads with the
pure functions of :mod:`.convert` and :mod:`.topdown`. Its world frame is the scene's own frame
(``Scene.pose``; the first scene of a process sits at the simulator's origin), floor 0 at z = 0.

Instance ids: every non-structure object gets id ``1 + its index in name order`` -- stable across
runs, unlike OmniGibson's first-seen registry ids -- and everything structural (floors, walls,
ceilings), the background and particle systems is 0, as in the apartments.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from envs.ground_nav.agent import T_world_base, T_world_cam
from envs.ground_nav.navgrid import Planner, main_component
from envs.truth import NavGrid, ObjectTruth, SceneTruth
from spatial_memory.frame import CameraFrame
from spatial_memory.topdown import LEVELS, TopDownFrame

from .config import OmniGibsonConfig
from .convert import (
    box_in_frame,
    depth_from_og,
    instance_from_og,
    navgrid_from_trav_map,
    resize_dataset_map,
    rgb_from_og,
    traversable,
    wall_cells,
)
from .sim import OmniGibsonSim
from .topdown import (
    GROUND,
    T_world_down,
    cells_on_map,
    down_tiles,
    empty_easy,
    fill_gaps,
    geometry_map,
    point_spacing_px,
    scene_frame,
    splat,
)

NO_OBJECT_MAP = "floor_trav_no_obj_0.png"


class OGScene:
    def __init__(self, cfg: OmniGibsonConfig, name: str, sim: OmniGibsonSim) -> None:
        self.cfg, self.name, self.sim = cfg, name, sim
        trav, res = sim.trav_map()
        self.grid: NavGrid = navgrid_from_trav_map(trav, res, cfg.agent_radius)
        no_obj = resize_dataset_map(sim.layout_image(NO_OBJECT_MAP), res)
        if no_obj.shape != trav.shape:
            raise ValueError(f"{name}: {NO_OBJECT_MAP} at {res} m is {no_obj.shape}, the traversable map {trav.shape}")
        self.building = traversable(no_obj)  # the floor without furniture
        self.wall_layer = wall_cells(no_obj, res, cfg.wall_thickness_m)
        self.frame: TopDownFrame = scene_frame(self.building, self.grid)
        T_scene_world = np.linalg.inv(sim.T_world_scene)
        records = sorted(sim.objects(), key=lambda r: r.name)
        objects = []
        for i, r in enumerate(records, start=1):
            box = box_in_frame(T_scene_world, r.box)
            objects.append(ObjectTruth(r.name, r.category, box.center.copy(), np.asarray(box.R), box, i))
        self.objects: tuple[ObjectTruth, ...] = tuple(objects)
        self.ids_by_name = {o.id: o.instance_id for o in self.objects}
        self.categories = {o.instance_id: o.category for o in self.objects}
        self._maps: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ navigation
    @cached_property
    def planner(self) -> Planner:
        return Planner(self.grid)

    @cached_property
    def main_component(self) -> np.ndarray:
        """HxW bool: the largest 8-connected free region (starts, goals and the exploration live here)."""
        main = main_component(self.grid)
        if not main.any():
            raise ValueError(f"{self.name}: no free cell for an agent of radius {self.cfg.agent_radius} m")
        return main

    # ------------------------------------------------------------------ views
    def camera_frame(self, pose: np.ndarray, T_world_odom: np.ndarray | None = None, step: int = 0) -> CameraFrame:
        """The ego frame at a world pose [x, y, yaw]; its pose in the odometry frame ``T_world_odom`` (None: world)."""
        c = self.cfg
        if self.sim.robot is None:
            raw = self.sim.view_from(T_world_cam(pose, c.camera_height, c.camera_pitch_deg))
        else:
            raw = self.sim.view_from_robot(T_world_base(pose))
        return self._frame(raw, T_world_odom, step)

    def frame_at(self, T_world_cam_cv: np.ndarray, step: int = 0) -> CameraFrame:
        """What our free camera sees from any OpenCV pose (world frame)."""
        return self._frame(self.sim.view_from(T_world_cam_cv), None, step)

    def _frame(self, raw, T_world_odom: np.ndarray | None, step: int) -> CameraFrame:
        inst, labels = instance_from_og(raw.seg, raw.seg_info, self.ids_by_name, self.categories)
        T = self.sim.in_scene(raw.T_world_cam)
        if T_world_odom is not None:
            T = np.linalg.inv(T_world_odom) @ T
        return CameraFrame(
            rgb=rgb_from_og(raw.rgb),
            depth=depth_from_og(raw.depth, self.cfg.max_depth_m),
            K=raw.K,
            T_world_cam=T,
            instance=inst,
            labels=labels,
            step=step,
        )

    # ------------------------------------------------------------------ truth and maps
    def scene_truth(self, pose: np.ndarray, T_world_odom: np.ndarray) -> SceneTruth:
        return SceneTruth(
            objects=self.objects,
            bounds=self.frame.bounds,
            T_world_agent=T_world_base(pose),
            navigable=self.grid,
            T_world_odom=np.array(T_world_odom, dtype=np.float64),
        )

    def obstacle_boxes(self) -> list:
        return [o.box for o in self.objects if o.category not in GROUND]

    def topdown_map(self, level: str) -> np.ndarray:
        """GT map (uint8 640x512x3 on :attr:`frame`): easy rendered from above, medium/hard from geometry. Cached."""
        if level not in LEVELS:
            raise ValueError(f"unknown top-down level {level!r}; expected one of {LEVELS}")
        if level not in self._maps:
            if level == "easy":
                self._maps[level] = self._render_easy()
            else:
                walls = cells_on_map(self.wall_layer, self.grid, self.frame)
                self._maps[level] = geometry_map(level, walls, self.obstacle_boxes(), self.frame)
        return self._maps[level].copy()

    def _render_easy(self) -> np.ndarray:
        img, zbuf = empty_easy(self.frame)
        with self.sim.hidden():
            for xyz in down_tiles(self.frame, self.cfg.easy_altitude_m, self.cfg.camera_hfov_deg):
                T = T_world_down(*xyz)
                view = self.frame_at(T)
                splat(img, zbuf, self.frame, view, view.T_world_cam)
        c = self.cfg
        fill_gaps(img, zbuf, point_spacing_px(self.frame, c.easy_altitude_m, c.camera_hfov_deg, c.width) + 1.0)
        return img
