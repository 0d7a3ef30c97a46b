"""``SpatialMemory``: one global map of an episode, fused online from RGB-D frames (docs/ARCHITECTURE.md §3).

``integrate(frame)`` does, per frame:

1. back-project the valid depth pixels of instance segments into the memory's world frame (:mod:`._kernels`);
2. group the labelled pixels by instance and fuse each group into the object registry
   (:mod:`.objects`);
3. carve: object sample points that the frame shows are gone (seen through, or visible but covered
   by something else in the masks) are dropped, so moved objects are followed; every
   ``carve_every`` frames the voxels the depth sees through lose evidence;
4. fuse all valid pixels' points into the sparse voxel map (:mod:`.voxels`) with colour and object label;
5. append the camera pose to the trajectory.

Queries use docs/ARCHITECTURE.md §4's conventions: egocentric direction 0 = straight ahead, left positive,
(-180, 180]; distance = horizontal distance camera -> object centre; map heading 0 = image up.

The memory lives in whatever frame its poses are in (the robot's odometry frame), floor at z = 0.
Thread safety: one writer; other threads read a :meth:`snapshot`, which is copied under a lock.
:attr:`version` changes with every change of the contents (integrate, integrate_boxes, load), so
caches of derived results can live outside the memory. Planners read :meth:`occupancy2d`,
:meth:`occupancy_extent` and :meth:`objects_by_category` (:mod:`.queries`).

Views without a pose and maps without a frame: :meth:`localize` (:mod:`.localize`) estimates the
pose of a frame from the depth and objects it shows; :meth:`register_topdown` (:mod:`.register`)
finds the similarity from the memory's frame to a given top-down image. Both only read the memory.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable

import numpy as np

from . import _kernels as kern
from . import _object_kernels as okern
from . import serialization
from .draw import BLUE, GREEN, RED, compose_level, draw_arrow, draw_disk, draw_polyline
from .drift import DriftCorrector
from .evidence import depth_consistent
from .frame import CameraFrame
from .geometry import as_pose, egocentric_bearing, invert_T, vst_box_to_camera
from .localize import LocalizeConfig, Localization
from .localize import localize as _localize
from .maps import MapConfig, MapLayers, map_layers
from .memory_config import MemoryConfig
from .pose import CameraPose
from .lattice import CellLattice
from .objects import MemoryObject, ObjectRegistry
from .queries import Occupancy2D, OccupancyBands, normalise_category, occupancy2d, occupancy_extent
from .register import RegisterConfig, TopDownRegistration
from .register import register_topdown as _register_topdown
from .topdown import LEVELS, TopDownFrame
from .voxels import VoxelMap

FORMAT = "spatial_memory/1"
_VERSIONS = itertools.count(1)  # one sequence for every memory of the process: a version names one state


@dataclass(frozen=True, eq=False)
class Pose(CameraPose):
    """A camera pose of the trajectory: ``T_world_cam`` and the step it was taken at."""

    T_world_cam: np.ndarray
    step: int


class SpatialMemory:
    """Online global map: sparse voxels, an object registry and the trajectory (see module doc)."""

    def __init__(self, voxel_size: float | None = None, config: MemoryConfig | None = None, **overrides):
        cfg = config or MemoryConfig()
        if voxel_size is not None:
            overrides["voxel_size"] = voxel_size
        if overrides:
            cfg = replace(cfg, **overrides)
        self.config = cfg
        self.voxels = VoxelMap(cfg.voxel_size, cfg.colour_weight_max)
        self.registry = ObjectRegistry(**self._registry_config(cfg))
        self._traj_T = np.zeros((0, 4, 4), dtype=np.float64)
        self._traj_odom = np.zeros((0, 4, 4), dtype=np.float64)  # the poses as given (odometry), before correction
        self._traj_step = np.zeros(0, dtype=np.int64)
        self.drift = DriftCorrector(cfg.drift) if cfg.drift is not None else None
        self._n_traj = 0
        self._n_frames = 0
        self._version = next(_VERSIONS)
        self._derived: tuple[int, dict] = (self._version, {})
        self._lock = threading.Lock()
        self.read_only = False

    @staticmethod
    def _registry_config(cfg: MemoryConfig) -> dict:
        return dict(
            association=cfg.association,
            max_points=cfg.max_points,
            points_per_frame=cfg.points_per_frame,
            assoc_distance=cfg.assoc_distance,
            seed=cfg.seed,
            min_support=cfg.min_support,
            min_observations=cfg.min_observations,
        )

    def __repr__(self) -> str:
        return (
            f"SpatialMemory(voxels={len(self.voxels)}, objects={len(self.registry)}, frames={self._n_frames}, "
            f"voxel_size={self.config.voxel_size})"
        )

    @property
    def n_frames(self) -> int:
        return self._n_frames

    @property
    def version(self) -> int:
        """A number that grows with every change (integrate, integrate_boxes, load). Versions come from
        one counter for every memory of the process, so equal versions mean equal contents: a
        :meth:`snapshot` keeps the version of the state it copied. Key caches on it, not on ``id``."""
        return self._version

    def derived(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """What ``build()`` computes from the memory's contents (a localisation index, registration's
        features of a map level, a view's localisation), kept under ``key`` until the contents change
        (:attr:`version`); a :meth:`snapshot` shares what was derived before it was taken."""
        version, values = self._derived
        if version != self._version:
            values = {}
            self._derived = (self._version, values)
        if key not in values:
            values[key] = build()
        return values[key]

    def _writable(self) -> None:
        if self.read_only:
            raise RuntimeError("this SpatialMemory is a read-only snapshot; integrate into the live memory")

    # ================================================================================ fusion
    def integrate(self, frame: CameraFrame, record_pose: bool = True) -> None:
        """Fuse one RGB-D frame (and its instance masks, if any). ``record_pose=False`` fuses the
        frame without adding its camera to the trajectory (a second camera on the same robot)."""
        if not isinstance(frame, CameraFrame):
            raise TypeError(f"integrate needs a CameraFrame, got {type(frame).__name__}")
        cfg = self.config
        reach = np.abs(frame.T_world_cam[:3, 3]).max() + cfg.max_depth
        if reach >= 0.99 * kern.KEY_OFFSET * cfg.voxel_size:
            raise ValueError(
                f"CameraFrame.T_world_cam translation {frame.T_world_cam[:3, 3].tolist()} "
                f"is too far from the origin for voxel size {cfg.voxel_size}"
            )
        with self._lock:
            self._writable()
            self._version = next(_VERSIONS)  # first: a failed integration still counts as a change
            self._integrate(frame, record_pose)

    def _instance_slots(self, frame: CameraFrame) -> tuple[np.ndarray, list[int], list[str]]:
        """Lookup table instance id -> slot for the frame's labelled, non-structure instances."""
        ids = sorted(int(i) for i, cat in frame.labels.items() if i > 0 and cat not in self.config.structure_categories)
        if frame.instance is None or not ids:
            return np.full(1, -1, dtype=np.int32), [], []
        if ids[-1] >= 1 << 24:
            raise ValueError(f"CameraFrame.labels: instance ids must be < 2**24, got {ids[-1]}")
        lut = np.full(ids[-1] + 1, -1, dtype=np.int32)
        lut[ids] = np.arange(len(ids), dtype=np.int32)
        if self.config.association != "instance":  # a detector's ids mean nothing: order segments by place
            order = np.argsort(okern.first_pixels(frame.instance, lut, len(ids)), kind="stable")
            ids = [ids[k] for k in order]
            lut[ids] = np.arange(len(ids), dtype=np.int32)
        return lut, ids, [frame.labels[i] for i in ids]

    def _integrate(self, frame: CameraFrame, record_pose: bool) -> None:
        cfg = self.config
        T_odom = frame.T_world_cam
        if self.drift is not None:  # register the frame to the map so far: the pose in the memory's frame
            T = self.drift.correct(frame.depth, frame.K, T_odom)
            frame = CameraFrame(frame.rgb, frame.depth, frame.K, T, frame.instance, frame.labels, frame.step)
        T_cam_world = invert_T(frame.T_world_cam)
        lut, slot_ids, slot_cats = self._instance_slots(frame)
        pts, pix, slot = self._backproject(frame, lut)
        obj_of_slot = self._observe_objects(frame.step, pts, slot, slot_ids, slot_cats)
        # a detector's masks miss and bleed: only the depth (seeing through) carves objects in detector mode
        obj_img = self._object_image(frame, pix, slot, obj_of_slot) if cfg.association == "instance" else None
        self.registry.carve(T_cam_world, frame.K, frame.depth, obj_img, *cfg.carve_margin)
        self.registry.count_chances(T_cam_world, frame.K, frame.depth, obj_of_slot)
        self.registry.refit_dirty()
        self._n_frames += 1
        if cfg.carve_every and self._n_frames % cfg.carve_every == 0:
            self.voxels.carve(T_cam_world, frame.K, frame.depth, *cfg.carve_margin)
        self.voxels.integrate(
            frame.depth,
            frame.rgb,
            frame.instance,
            lut,
            obj_of_slot,
            frame.T_world_cam,
            frame.K,
            cfg.min_depth,
            cfg.max_depth,
            int(cfg.pixel_stride),
        )
        if record_pose:
            self._append_pose(frame.T_world_cam, frame.step, T_odom)

    def _backproject(self, frame: CameraFrame, lut: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World points of the valid pixels that belong to an instance slot, their flat pixel index and
        slot, raster order (what the object passes read; the voxel pass reads the frame itself)."""
        cfg, K = self.config, frame.K
        H, W = frame.depth.shape
        stride = int(cfg.pixel_stride)
        n_max = ((H + stride - 1) // stride) * ((W + stride - 1) // stride)
        pts = np.empty((n_max, 3), dtype=np.float32)
        pix = np.empty(n_max, dtype=np.int64)
        slot = np.empty(n_max, dtype=np.int32)
        instance = frame.instance if frame.instance is not None else np.zeros((0, 0), dtype=np.int32)
        n = kern.backproject_labelled(
            frame.depth,
            instance,
            lut,
            frame.T_world_cam,
            K[0, 0],
            K[1, 1],
            K[0, 2],
            K[1, 2],
            cfg.min_depth,
            cfg.max_depth,
            stride,
            pts,
            pix,
            slot,
        )
        return pts[:n], pix[:n], slot[:n]

    def _observe_objects(
        self, step: int, pts: np.ndarray, slot: np.ndarray, slot_ids: list[int], slot_cats: list[str]
    ) -> np.ndarray:
        """Fuse each instance segment seen in the frame into the registry; the object index per slot."""
        obj_of_slot = np.full(max(len(slot_ids), 1), -1, dtype=np.int32)
        if not slot_ids:
            return obj_of_slot
        n_slots, M = len(slot_ids), self.registry.points_per_frame
        if self.config.association != "instance":
            slot = depth_consistent(slot, pts, n_slots)
        seg_pts = np.zeros((n_slots, M, 3), dtype=np.float32)
        seg_count = np.zeros(n_slots, dtype=np.int64)
        seg_sum = np.zeros((n_slots, 3), dtype=np.float64)
        okern.segment_samples(slot, pts, n_slots, M, seg_pts, seg_count, seg_sum)
        seen = np.flatnonzero(seg_count > 0)
        if len(seen):
            samples = [seg_pts[s, : min(int(seg_count[s]), M)] for s in seen]
            centroids = seg_sum[seen] / seg_count[seen, None]
            obj_of_slot[seen] = self.registry.observe_segments(
                step, [slot_ids[s] for s in seen], [slot_cats[s] for s in seen], samples, centroids
            )
        return obj_of_slot

    @staticmethod
    def _object_image(
        frame: CameraFrame, pix: np.ndarray, slot: np.ndarray, obj_of_slot: np.ndarray
    ) -> np.ndarray | None:
        """HxW memory object index per pixel (-1 = none); None for a frame without masks."""
        if frame.instance is None:
            return None
        return okern.object_image(pix, slot, obj_of_slot, *frame.depth.shape)

    def integrate_boxes(
        self,
        boxes: Iterable,
        T_world_cam: np.ndarray,
        step: int,
        categories: Iterable[str] | None = None,
        record_pose: bool = False,
    ) -> list[str]:
        """Fuse 3D boxes detected in a camera frame (Visual-Spatial-Tuning's 9-DoF format).

        ``boxes``: either ``(category, box9)`` pairs or dicts ``{"label"/"category": str,
        "bbox_3d": box9}``, or plain ``box9`` rows with ``categories`` given separately.
        ``box9 = [x, y, z, x_size, y_size, z_size, pitch, yaw, roll]`` in the OpenCV camera frame,
        angles in degrees / 180 (see :func:`.geometry.vst_box_to_camera`). Objects are associated by
        category and 3D proximity. Returns the memory id each box went to.
        """
        T_world_cam = as_pose(T_world_cam, "integrate_boxes: T_world_cam")
        items = _parse_boxes(boxes, categories)
        out = []
        with self._lock:
            self._writable()
            self._version = next(_VERSIONS)
            for cat, box9 in items:
                c_cam, size, R_cam_box = vst_box_to_camera(box9)
                c_world = T_world_cam[:3, :3] @ c_cam + T_world_cam[:3, 3]
                o = self.registry.observe_box(int(step), cat, c_world, size, T_world_cam[:3, :3] @ R_cam_box)
                out.append(self.registry.ids[o])
            if record_pose:
                self._append_pose(T_world_cam, int(step))
        return out

    def _append_pose(self, T_world_cam: np.ndarray, step: int, T_odom: np.ndarray | None = None) -> None:
        n = self._n_traj
        if n == len(self._traj_T):
            cap = max(64, 2 * n)
            T, To, s = np.zeros((cap, 4, 4)), np.zeros((cap, 4, 4)), np.zeros(cap, dtype=np.int64)
            T[:n], To[:n], s[:n] = self._traj_T[:n], self._traj_odom[:n], self._traj_step[:n]
            self._traj_T, self._traj_odom, self._traj_step = T, To, s
        self._traj_T[n] = T_world_cam
        self._traj_odom[n] = T_world_cam if T_odom is None else T_odom
        self._traj_step[n] = step
        self._n_traj = n + 1

    def to_memory_frame(self, T_odom_cam: np.ndarray, step: int | None = None) -> np.ndarray:
        """A pose given in the odometry frame (the frames' own poses) in the memory's frame: the drift
        correction of the trajectory entry at ``step`` (the latest one at or before it; default: the
        latest entry). Identity without drift correction."""
        T = as_pose(T_odom_cam, "to_memory_frame: T_odom_cam")
        if self.drift is None or self._n_traj == 0:
            return T
        i = self._n_traj - 1
        if step is not None:
            at = np.flatnonzero(self._traj_step[: self._n_traj] <= int(step))
            i = int(at[-1]) if len(at) else 0
        return self._traj_T[i] @ invert_T(self._traj_odom[i]) @ T

    def pose_uncertainty(self) -> tuple[float, float]:
        """(sigma_xy_m, sigma_yaw_rad): how far the latest pose may be off against the map, from the drift
        correction's covariance (it grows with every motion and shrinks with every accepted fit); (0, 0)
        without drift correction (the poses are taken as given)."""
        if self.drift is None:
            return 0.0, 0.0
        P = self.drift.P
        return float(np.sqrt(max(0.5 * (P[0, 0] + P[1, 1]), 0.0))), float(np.sqrt(max(P[2, 2], 0.0)))

    # ================================================================================ queries
    def objects(self) -> list[MemoryObject]:
        """The objects in memory (detector mode: the confirmed ones, see :mod:`.objects`)."""
        return [self.registry.view(int(o)) for o in np.flatnonzero(self.registry.confirmed())]

    def object(self, target: str | int) -> MemoryObject:
        """One object by memory id, by a category unique in memory, or by instance id (int)."""
        return self.registry.view(self.registry.resolve(target))

    def objects_by_category(self, category: str) -> list[MemoryObject]:
        """The objects whose category matches ``category`` after :func:`.queries.normalise_category`
        (``"teddy bear"`` finds ``teddy_bear``), in memory order; [] when there is none. Like
        :meth:`objects`, only the confirmed ones: in detector mode a detection the later views did not
        repeat (a false positive) is not an object yet, and a merged-away object is none."""
        key = normalise_category(category)
        ok = self.registry.confirmed()
        return [
            self.registry.view(o)
            for o, c in enumerate(self.registry.categories)
            if ok[o] and normalise_category(c) == key
        ]

    def occupancy2d(
        self,
        lattice: CellLattice,
        shape: tuple[int, int],
        bands: OccupancyBands | None = None,
        offset: tuple[int, int] = (0, 0),
        exclude: str | int | None = None,
    ) -> Occupancy2D:
        """Floor, obstacle and height layers (:class:`.queries.Occupancy2D`) of the cells
        ``offset + [0, shape)`` of ``lattice`` (x0, y0, resolution), from the occupied voxels in the
        height ``bands``; the voxels of object ``exclude`` (an id, see :meth:`object`) are left out of
        the height. See :mod:`.queries`."""
        skip = -1 if exclude is None else self.registry.resolve(exclude)
        return occupancy2d(self.voxels, lattice, shape, bands or OccupancyBands(), offset, skip)

    def occupancy_extent(
        self, lattice: CellLattice, shape: tuple[int, int], bands: OccupancyBands | None = None
    ) -> tuple[int, int, int, int] | None:
        """(row_min, row_max, col_min, col_max), inclusive, of the cells of ``lattice`` in ``[0, shape)``
        that :meth:`occupancy2d` would mark floor or obstacle; None when there is none."""
        return occupancy_extent(self.voxels, lattice, shape, bands or OccupancyBands())

    def agent_pose(self) -> Pose:
        """The latest camera pose of the trajectory."""
        if self._n_traj == 0:
            raise LookupError("the memory has no pose yet: integrate a frame first")
        return Pose(self._traj_T[self._n_traj - 1].copy(), int(self._traj_step[self._n_traj - 1]))

    def trajectory(self) -> tuple[np.ndarray, np.ndarray]:
        """(poses Nx4x4 T_world_cam, steps N), one per recorded frame, oldest first."""
        return self._traj_T[: self._n_traj].copy(), self._traj_step[: self._n_traj].copy()

    def egocentric(self, target: str | int, T_world_cam: np.ndarray | None = None) -> tuple[float, float]:
        """(direction_deg, distance_m) of an object's centre seen from a camera pose (default: the
        latest): 0 = straight ahead, left positive, (-180, 180]; horizontal distance in metres."""
        o = self.registry.resolve(target)
        if T_world_cam is None:
            if self._n_traj == 0:
                raise LookupError("the memory has no pose yet: pass T_world_cam or integrate a frame first")
            T_world_cam = self._traj_T[self._n_traj - 1]
        elif not (
            isinstance(T_world_cam, np.ndarray) and T_world_cam.shape == (4, 4) and np.isfinite(T_world_cam).all()
        ):
            T_world_cam = as_pose(T_world_cam, "egocentric: T_world_cam")  # the full check only off the fast path
        return egocentric_bearing(T_world_cam, self.registry.a["center"][o])

    def map_point(self, target: str | int, frame: TopDownFrame) -> tuple[int, int]:
        """An object's centre on the [0, 999] point grid of ``frame``."""
        g = frame.world_to_grid(self.registry.a["center"][self.registry.resolve(target), :2])
        return int(g[0]), int(g[1])

    # ================================================================================ maps
    def default_frame(self, margin: float = 0.5, width: int = 640, height: int = 512) -> TopDownFrame:
        """A map frame around everything observed below the ceiling (and the trajectory)."""
        xy = []
        b = self.voxels.bounds_xy(self.config.map.ceiling_z)
        if b is not None:
            xy += [b[:2], b[2:]]
        if self._n_traj:
            xy += list(self._traj_T[: self._n_traj, :2, 3])
        if not xy:
            raise LookupError("the memory is empty: nothing to frame")
        xy = np.asarray(xy)
        lo, hi = xy.min(axis=0) - margin, xy.max(axis=0) + margin
        return TopDownFrame(float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1]), width, height)

    def layers(self, frame: TopDownFrame, map_config: MapConfig | None = None) -> MapLayers:
        """The boolean wall and object layers and the colour image behind the three levels."""
        return map_layers(self.voxels, self.registry, frame, map_config or self.config.map)

    def topdown(
        self,
        level: str,
        frame: TopDownFrame | None = None,
        *,
        trajectory: bool = False,
        agent: bool = False,
        objects: Iterable[str | int] = (),
        map_config: MapConfig | None = None,
    ) -> np.ndarray:
        """The memory's top-down map (uint8 HxWx3) of one level on ``frame`` (default: :meth:`default_frame`).

        Overlays: ``trajectory`` (red polyline, start as a blue dot), ``agent`` (green arrow along
        the latest heading), ``objects`` (red dots at the named objects' centres).
        """
        if level not in LEVELS:
            raise ValueError(f"unknown top-down level {level!r}; expected one of {LEVELS}")
        frame = frame or self.default_frame()
        lay = self.layers(frame, map_config)
        img = compose_level(level, lay.walls, lay.objects, lay.colour)
        if trajectory and self._n_traj:
            xy = self._traj_T[: self._n_traj, :2, 3]
            draw_polyline(img, frame, xy, RED)
            draw_disk(img, frame, xy[0], 5.0, BLUE)
        if agent and self._n_traj:
            pose = self.agent_pose()
            draw_arrow(img, frame, pose.position[:2], pose.yaw, colour=GREEN)
        for t in objects:
            draw_disk(img, frame, self.registry.a["center"][self.registry.resolve(t), :2], 5.0, RED)
        return img

    # ====================================================================== views without a pose, maps without a frame
    def localize(self, frame: CameraFrame, config: LocalizeConfig | None = None) -> Localization:
        """Where ``frame`` was taken, in the memory's frame, from the depth and objects it shows;
        ``frame.T_world_cam`` is ignored (a view that arrives without a pose). See :mod:`.localize`.

        Returns a :class:`Localization`: ``T_world_cam`` (the best guess, always a valid pose),
        ``confidence`` in [0, 1] and ``ok``; an ambiguous view (a blank wall, two identical rooms) or a
        view of something the memory never saw comes back with a low confidence, not silently wrong.
        About 0.1-0.3 s per 256x256 view on one core; the first call on a memory state also builds
        an index (0.1-0.5 s). Read-only: on a live memory that another thread writes, call it on a
        :meth:`snapshot`.
        """
        return _localize(self, frame, config)

    def register_topdown(
        self, image: np.ndarray, level: str, config: RegisterConfig | None = None, map_config: MapConfig | None = None
    ) -> TopDownRegistration:
        """Register the memory's own map of ``level`` (easy / medium / hard) to a given top-down
        ``image`` (HxWx3 uint8, north-up, drawn on an unknown frame and scale): a
        :class:`TopDownRegistration` with the similarity memory xy -> image pixels, point and heading
        conversions (``odom_to_grid``, ``yaw_to_heading``, ``pose_to_map``) and a confidence. See
        :mod:`.register`. About 0.3-1 s.
        """
        return _register_topdown(self, image, level, config, map_config)

    # ================================================================================ state
    def _state(self) -> tuple[dict[str, np.ndarray], dict]:
        vox = self.voxels.state()
        obj_arrays, obj_meta = self.registry.state()
        arrays = {f"vox_{k}": v for k, v in vox.items()}
        arrays.update({f"obj_{k}": v for k, v in obj_arrays.items()})
        arrays["traj_T"] = self._traj_T[: self._n_traj].copy()
        arrays["traj_odom"] = self._traj_odom[: self._n_traj].copy()
        arrays["traj_step"] = self._traj_step[: self._n_traj].copy()
        meta = {"format": FORMAT, "config": self.config.to_dict(), "n_frames": self._n_frames, "objects": obj_meta}
        if self.drift is not None:
            drift_arrays, meta["drift"] = self.drift.state()
            arrays.update(drift_arrays)
        return arrays, meta

    @classmethod
    def _from_state(cls, arrays: dict[str, np.ndarray], meta: dict) -> "SpatialMemory":
        if meta.get("format") != FORMAT:
            raise ValueError(f"not a spatial memory of format {FORMAT!r} (found {meta.get('format')!r})")
        try:
            cfg = MemoryConfig.from_dict(meta["config"])
            mem = cls(config=cfg)
            mem.voxels = VoxelMap.from_state(
                cfg.voxel_size, cfg.colour_weight_max, {k[4:]: v for k, v in arrays.items() if k.startswith("vox_")}
            )
            mem.registry = ObjectRegistry.from_state(
                cls._registry_config(cfg),
                {k[4:]: v for k, v in arrays.items() if k.startswith("obj_")},
                meta["objects"],
            )
            T, steps = np.asarray(arrays["traj_T"]), np.asarray(arrays["traj_step"])
            T_odom = np.asarray(arrays.get("traj_odom", T))
            n_frames = int(meta["n_frames"])
            if cfg.drift is not None:
                mem.drift = DriftCorrector.from_state(arrays, meta["drift"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"spatial memory state is incomplete or malformed: {exc!r}") from exc
        if T.dtype != np.float64 or T.shape[1:] != (4, 4) or steps.dtype != np.int64 or steps.shape != (len(T),):
            raise ValueError(
                f"trajectory arrays malformed: traj_T {T.dtype} {T.shape}, traj_step {steps.dtype} {steps.shape}"
            )
        if len(mem.registry) and np.any(mem.voxels.field("label") >= len(mem.registry)):
            raise ValueError("voxel labels refer to objects that are not in the registry")
        if T_odom.dtype != np.float64 or T_odom.shape != T.shape:
            raise ValueError(f"trajectory arrays malformed: traj_odom {T_odom.dtype} {T_odom.shape}")
        mem._traj_T, mem._traj_odom, mem._traj_step, mem._n_traj = T.copy(), T_odom.copy(), steps.copy(), len(T)
        mem._n_frames = n_frames
        mem._version = next(_VERSIONS)
        return mem

    def save(self, path: str | Path) -> Path:
        """Write the whole memory to one ``.npz`` file (arrays + JSON metadata; no pickle)."""
        with self._lock:
            arrays, meta = self._state()
        return serialization.write(path, arrays, meta)

    @classmethod
    def load(cls, path: str | Path) -> "SpatialMemory":
        """Read a memory written by :meth:`save`; a corrupted or foreign file raises ``ValueError``."""
        arrays, meta = serialization.read(path)
        return cls._from_state(arrays, meta)

    def snapshot(self) -> "SpatialMemory":
        """A consistent read-only copy for other threads (queries and maps work; integrate raises).

        Costs one memcpy of the map (a few ms for a whole apartment), taken under the writer's lock.
        """
        snap = SpatialMemory(config=self.config)
        with self._lock:
            snap.voxels = self.voxels.copy()
            snap.registry = self.registry.copy()
            snap._traj_T, snap._traj_step = self.trajectory()
            snap._traj_odom = self._traj_odom[: self._n_traj].copy()
            snap._n_traj, snap._n_frames, snap._version = self._n_traj, self._n_frames, self._version
            snap._derived = self._derived  # the same contents: what was derived from them holds for both
            snap.drift = None if self.drift is None else self.drift.copy()
        snap.read_only = True
        return snap


def _parse_boxes(boxes: Iterable, categories: Iterable[str] | None) -> list[tuple[str, np.ndarray]]:
    boxes = list(boxes)
    if categories is not None:
        cats = list(categories)
        if len(cats) != len(boxes):
            raise ValueError(f"integrate_boxes: {len(boxes)} boxes but {len(cats)} categories")
        pairs = list(zip(cats, boxes))
    else:
        pairs = []
        for b in boxes:
            if isinstance(b, dict):
                cat = b.get("label", b.get("category"))
                pairs.append((cat, b.get("bbox_3d")))
            elif isinstance(b, (tuple, list)) and len(b) == 2 and isinstance(b[0], str):
                pairs.append((b[0], b[1]))
            else:
                raise ValueError(
                    "integrate_boxes: each box needs a category: give (category, box9) pairs, "
                    f"dicts with 'label' and 'bbox_3d', or categories=...; got {b!r}"
                )
    out = []
    for cat, box9 in pairs:
        if not isinstance(cat, str) or not cat:
            raise ValueError(f"integrate_boxes: a box category must be a non-empty string, got {cat!r}")
        if box9 is None:
            raise ValueError(f"integrate_boxes: box for {cat!r} has no 'bbox_3d'")
        out.append((cat, np.asarray(box9, dtype=np.float64)))
    return out
