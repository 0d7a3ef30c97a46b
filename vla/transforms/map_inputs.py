"""The spatial memory as a policy input: fuse every observation, add ``memory/*`` entries.

:class:`MemoryInputs` owns one :class:`~spatial_memory.SpatialMemory` per episode. Called on an
:class:`~envs.observation.Observation` (or, with :meth:`MemoryInputs.apply_dict`, on its plain-data
dict) it integrates the chosen camera's frame and returns the observation with ``memory`` entries
that *any* policy can read -- scripted, learned or remote:

    memory/frames                    int, frames fused so far
    memory/topdown                   uint8 HxWx3: the memory's top-down map of ``map_level``, with
                                     the trajectory (red), its start (blue) and the agent (green arrow)
    memory/agent/point               int32 (2,): the agent on that map, [0, 999] grid (x right, y down)
    memory/agent/heading_deg         float: its heading on the map, 0 = image up, left positive
    memory/objects/id                unicode N: memory object ids, nearest first
    memory/objects/category          unicode N
    memory/objects/direction_deg     float32 N: egocentric direction from the current camera (left positive)
    memory/objects/distance_m        float32 N: horizontal distance from the current camera
    memory/objects/point             int32 Nx2: on the top-down map's [0, 999] grid
    memory/objects/center            float32 Nx3: in the memory's (odometry) frame
    memory/objects/origin            float32 Nx3 (with ``origins``): where the object was when the memory
                                     first held it (a moved object's start: where the bowl stood)
    memory/text                      str: the object table in words (what a language model reads)
    memory/routes/kind               unicode R (with ``routes``): "target" | "frontier", the target's first
    memory/routes/direction_deg      float32 R: where the way there heads first (left positive)
    memory/routes/length_m           float32 R: the way's length

``inputs`` chooses which groups are computed (``topdown``, ``objects``, ``text``, ``routes``, ``origins``); the map
costs tens of milliseconds per step, the table well under one. ``routes`` (a mobile base only) plans on
the memory's map with the navigator's planner (:class:`~vla.navigation.routes.MapRoutes`: its
layers take every frame, the base's pose and bumps) the way to the target, once the memory has it, and
to the two best frontiers, and the text ends with them: ``"...; routes: sofa 20 deg left 4.1 m;
unexplored 35 deg right 2.0 m"``. The map's frame is ``map_frame = "fit"``
(everything the memory has seen, north-up, aspect kept), ``"ego"`` (a window of ``map_extent_m``
centred on the agent, north-up) or ``"ego_up"`` (the same window turned so that the agent's heading
points up: what lies ahead is above the agent, left is left -- the frame the actions are in).
Objects whose category appears in the instruction lead the table (the rest follow, nearest first).
``origins`` (with ``objects``) keeps, per memory object, its centre when the memory first held it: the
memory follows a moved object, so its start is otherwise lost -- what a manipulation policy needs when a
task refers to where something was (libero_mem, docs/LIBERO.md); the text then says where a moved object
was first seen, and :func:`origin_features` gives the named objects' starts as numbers.

The transform exposes its memory live (:meth:`live_memory`) for servers and viewers;
:class:`~vla.agents.map_feed.WithMemory` wraps any agent with it, and answers GST questions from that
memory (:class:`~vla.agents.map_feed.MemoryAnswers`).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import cv2
import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec
from spatial_memory import MemoryConfig, SpatialMemory
from spatial_memory.geometry import camera_yaw, egocentric_bearing
from spatial_memory.profiles import PROFILES, memory_config_for
from vla_common.strict import check_keys, field_names, from_dict
from spatial_memory.topdown import LEVELS, TopDownFrame

INPUT_GROUPS = ("topdown", "objects", "text", "routes", "origins")
MAP_FRAMES = ("fit", "ego", "ego_up")
MEMORY_PRESETS = ("auto", "apartment", "tabletop")
BASE_ACTIONS = ("forward_m", "left_m", "yaw_rad")  # a mobile base's action names (the house env's)


def is_mobile_base(spec: EnvSpec | None) -> bool:
    """Whether the env's actions start with a base's ``[forward_m, left_m, yaw_rad]``."""
    return spec is not None and tuple(spec.action.names[:3]) == BASE_ACTIONS


_LEGACY_NOISE = ("depth_sigma", "depth_dropout", "pose_drift_m", "pose_drift_deg")


@dataclass(frozen=True)
class MemoryInputsConfig:
    """What the memory fuses and what it adds to observations (see the module doc).

    camera: the camera fused (None: the first of the observation). memory: ``"apartment"``
    (``MemoryConfig()``, 5 cm voxels), ``"tabletop"`` (``MemoryConfig.tabletop()``, LIBERO scale) or
    ``"auto"`` (apartment for a mobile base, tabletop otherwise). memory_overrides: fields of
    :class:`MemoryConfig`. perception: the sensors the memory is built for (``gt``, ``realistic``,
    ``harsh``: :func:`spatial_memory.profiles.memory_config_for` picks the memory's settings for them;
    the noise itself is applied upstream, by the harness, to what the agent receives).
    """

    camera: str | None = None
    memory: str = "auto"
    memory_overrides: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[str, ...] = ("topdown", "objects", "text")
    map_level: str = "medium"
    map_size: tuple[int, int] = (256, 256)  # (height, width)
    map_frame: str = "fit"
    map_extent_m: float = 8.0
    max_objects: int = 32
    perception: str = "gt"

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "map_size", tuple(int(s) for s in self.map_size))
        bad = sorted(set(self.inputs) - set(INPUT_GROUPS))
        if bad:
            raise ValueError(f"unknown memory inputs {bad}; choose from {list(INPUT_GROUPS)}")
        if "origins" in self.inputs and "objects" not in self.inputs:
            raise ValueError("memory input 'origins' is a column of the object table: add 'objects' to inputs")
        if self.memory not in MEMORY_PRESETS:
            raise ValueError(f"memory preset must be one of {MEMORY_PRESETS}, got {self.memory!r}")
        if self.map_level not in LEVELS:
            raise ValueError(f"map_level must be one of {LEVELS}, got {self.map_level!r}")
        if self.map_frame not in MAP_FRAMES:
            raise ValueError(f"map_frame must be one of {MAP_FRAMES}, got {self.map_frame!r}")
        if len(self.map_size) != 2 or min(self.map_size) < 16:
            raise ValueError(f"map_size must be (height, width) of at least 16 pixels, got {self.map_size}")
        if not self.map_extent_m > 0 or int(self.max_objects) < 0:
            raise ValueError("map_extent_m must be > 0 and max_objects >= 0")
        check_keys(self.memory_overrides or {}, field_names(MemoryConfig), "memory_overrides")
        if self.perception not in PROFILES:
            raise ValueError(f"perception must be one of {sorted(PROFILES)}, got {self.perception!r}")
        self.memory_config(True)

    def memory_config(self, mobile_base: bool) -> MemoryConfig:
        tabletop = self.memory == "tabletop" or (self.memory == "auto" and not mobile_base)
        return memory_config_for(self.perception, tabletop, self.memory_overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists for tuples): what a checkpoint saves and :meth:`from_dict` reads back."""
        return json.loads(self.to_json())

    def to_json(self) -> str:
        """The config as canonical JSON (sorted keys): the identity the memory caches key their entries on."""
        return json.dumps(asdict(self), sort_keys=True, default=list)

    @classmethod
    def from_any(cls, config: "MemoryInputsConfig | dict[str, Any] | None") -> "MemoryInputsConfig":
        """The config as given, or read from a dict (None: the defaults)."""
        return config if isinstance(config, cls) else cls.from_dict(config)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "MemoryInputsConfig":
        d = dict(d or {})
        # Configs saved before the perception profiles (e.g. in older checkpoints) carry per-stream noise
        # options; at their default 0 they mean the gt profile, otherwise the noise now lives there.
        legacy = {k: d.pop(k) for k in _LEGACY_NOISE if k in d}
        if any(float(v or 0) for v in legacy.values()):
            raise ValueError(
                f"memory input noise options {sorted(legacy)} were replaced by perception profiles: "
                "use perception=realistic|harsh (docs/GST.md)"
            )
        return from_dict(cls, d, "memory input")


class MemoryInputs:
    """The stateful memory transform (see the module doc). ``reset(spec)`` starts an episode."""

    def __init__(self, config: MemoryInputsConfig | dict | None = None, seed: int | tuple = 0) -> None:
        self.config = MemoryInputsConfig.from_any(config)
        self.seed_value: int | tuple = seed
        self.spec: EnvSpec | None = None
        self.memory: SpatialMemory | None = None

    @property
    def mobile_base(self) -> bool:
        return self.spec is None or is_mobile_base(self.spec)

    def seed(self, seed: int | tuple[int, ...]) -> None:
        self.seed_value = seed

    def reset(self, spec: EnvSpec | None) -> None:
        self.spec = spec
        self.memory = SpatialMemory(config=self.config.memory_config(self.mobile_base))
        self.routes = None
        self._pose = None  # the base's [x, y, yaw] and frame of the last integrate (routes)
        self._origins: dict[str, np.ndarray] = {}  # memory object id -> its centre when first held (origins)
        if "routes" in self.config.inputs and self.mobile_base:
            from vla.navigation import NavigatorConfig
            from vla.navigation.routes import MapRoutes

            self.routes = MapRoutes(NavigatorConfig().for_perception(self.config.perception))

    # ------------------------------------------------------------------ the transform
    def camera(self, observation: Observation) -> str:
        cams = observation.cameras
        if not cams:
            raise ValueError("the spatial memory needs a camera frame in the observation (is rendering off?)")
        name = self.config.camera
        if name is not None:
            if name not in cams:
                raise ValueError(f"memory camera {name!r} is not in the observation; cameras: {sorted(cams)}")
            return name
        return next(iter(cams))

    def integrate(self, observation: Observation) -> None:
        if self.memory is None:
            self.reset(self.spec)
        frame = observation.cameras[self.camera(observation)]
        self.memory.integrate(frame)
        if "origins" in self.config.inputs:
            for o in self.memory.objects():
                self._origins.setdefault(o.id, np.asarray(o.center, dtype=np.float64).copy())
        if self.routes is not None:  # the base stands where its camera is, facing as it does
            T = np.asarray(frame.T_world_cam, dtype=np.float64)
            pose = np.array([T[0, 3], T[1, 3], camera_yaw(T)])
            self.routes.observe(frame, pose, bool(observation.sensors.get("blocked", False)))
            self._pose = (pose, frame)

    def __call__(self, observation: Observation) -> Observation:
        """Fuse the observation's frame and return it with the ``memory/*`` entries (see module doc)."""
        self.integrate(observation)
        observation.memory.update(self.entries(observation.instruction))
        return observation

    def apply_dict(self, d: dict[str, Any]) -> dict[str, Any]:
        """The same on an observation's plain-data dict (a server's or a dataset's form)."""
        return self(Observation.from_dict(d)).to_dict()

    # ------------------------------------------------------------------ entries
    def map_frame(self, scale: float = 1.0) -> TopDownFrame:
        """The top-down frame of ``memory/topdown`` for the memory's current state (``scale`` enlarges
        an ego window and its pixels alike: the margin an ``ego_up`` rotation needs)."""
        cfg, mem = self.config, self.memory
        h, w = cfg.map_size
        if cfg.map_frame in ("ego", "ego_up") and mem.n_frames:
            c = mem.agent_pose().position[:2]
            half = scale * cfg.map_extent_m / 2
            sx, sy = (half * w / h, half) if w >= h else (half, half * h / w)
            W, H = int(round(w * scale)), int(round(h * scale))
            return TopDownFrame(float(c[0] - sx), float(c[1] - sy), float(c[0] + sx), float(c[1] + sy), W, H)
        return mem.default_frame(width=w, height=h)

    def entries(
        self, instruction: str = "", view: np.ndarray | None = None, target: np.ndarray | None = None
    ) -> dict[str, Any]:
        """The ``memory/*`` entries (without the prefix) for the memory's current state; objects named
        in ``instruction`` lead the table. ``view``: the pose (memory frame) the table's directions and
        distances are measured from, instead of the agent's last one (a question's current view, where
        the memory localised it); ``target``: a point (memory frame) whose object leads the table,
        marked ``[target]`` (the object a question is about, as the memory resolved it)."""
        cfg, mem = self.config, self.memory
        out: dict[str, Any] = {"frames": int(mem.n_frames)}
        if mem.n_frames == 0:
            return out
        T = mem.agent_pose().T_world_cam if view is None else np.asarray(view, dtype=np.float64)
        rotate = cfg.map_frame == "ego_up"
        need_frame = "topdown" in cfg.inputs or "objects" in cfg.inputs
        frame = self.map_frame(1.5 if rotate else 1.0) if need_frame else None
        heading = float(TopDownFrame.yaw_to_map_heading(camera_yaw(T)))
        M = _heading_up(frame, T[:2, 3], heading, cfg.map_size) if rotate and frame is not None else None
        if "topdown" in cfg.inputs:
            img = mem.topdown(cfg.map_level, frame, trajectory=True, agent=True)
            if M is not None:
                img = cv2.warpAffine(
                    img, M, (cfg.map_size[1], cfg.map_size[0]), flags=cv2.INTER_AREA, borderValue=(255, 255, 255)
                )
            out["topdown"] = img
        if frame is not None:
            out["agent/point"] = self._grid(frame, M, T[:2, 3][None])[0]
            out["agent/heading_deg"] = 0.0 if M is not None else heading
        if "objects" in cfg.inputs or "text" in cfg.inputs:
            table = self.object_table(T, frame, instruction, M, target)
            if "objects" in cfg.inputs:
                out.update({f"objects/{k}": v for k, v in table.items()})
            if "text" in cfg.inputs:
                out["text"] = object_table_text(table)
        if self.routes is not None and view is None and self._pose is not None:
            self.routes.set_instruction(instruction)
            rows = self.routes.routes(mem, self._pose[1], self._pose[0])
            out["routes/kind"] = np.array([r.kind for r in rows], dtype=np.str_)
            out["routes/category"] = np.array([r.category for r in rows], dtype=np.str_)
            out["routes/direction_deg"] = np.array([r.direction_deg for r in rows], dtype=np.float32)
            out["routes/length_m"] = np.array([r.length_m for r in rows], dtype=np.float32)
            if "text" in cfg.inputs:
                routes = {k[len("routes/") :]: v for k, v in out.items() if k.startswith("routes/")}
                out["text"] = f"{out.get('text', object_table_text({}))}; routes: {routes_text(routes)}"
        return out

    def _grid(self, frame: TopDownFrame, M: np.ndarray | None, xy: np.ndarray) -> np.ndarray:
        """World xy -> the [0, 999] point grid of ``memory/topdown`` (through the rotation, for ego_up)."""
        if M is None:
            return np.asarray(frame.world_to_grid(np.asarray(xy, dtype=np.float64)), dtype=np.int32).reshape(-1, 2)
        uv = frame.world_to_pixel(np.asarray(xy, dtype=np.float64)).reshape(-1, 2)
        uv = uv @ M[:, :2].T + M[:, 2]
        h, w = self.config.map_size
        g = np.floor(uv / np.array([w, h]) * 1000.0)
        return np.clip(g, 0, 999).astype(np.int32).reshape(-1, 2)

    def object_table(
        self,
        T_world_cam: np.ndarray,
        frame: TopDownFrame | None,
        instruction: str = "",
        M: np.ndarray | None = None,
        target: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        from spatial_memory.queries import normalise_category

        said = f" {normalise_category(instruction)} "
        objects = self.memory.objects()
        goal = None
        if target is not None and objects:  # the object at the target point (its centre nearest to it)
            c = np.array([o.center for o in objects], dtype=np.float64)
            goal = int(np.argmin(np.linalg.norm(c - np.asarray(target, dtype=np.float64)[:3], axis=1)))
        rows = []
        for i, o in enumerate(objects):
            direction, distance = egocentric_bearing(T_world_cam, o.center)
            named = f" {normalise_category(o.category)} " in said
            rows.append((i != goal, not named, distance, direction, o))
        rows.sort(key=lambda r: r[:3])
        rows = rows[: int(self.config.max_objects)]
        n = len(rows)
        centers = np.array([r[4].center for r in rows], dtype=np.float32).reshape(n, 3)
        table = {
            "id": np.array([r[4].id for r in rows], dtype=np.str_),
            "category": np.array([r[4].category for r in rows], dtype=np.str_),
            "direction_deg": np.array([r[3] for r in rows], dtype=np.float32),
            "distance_m": np.array([r[2] for r in rows], dtype=np.float32),
            "center": centers,
        }
        if goal is not None:
            table["target"] = np.array([not r[0] for r in rows], dtype=bool)
        if "origins" in self.config.inputs:
            origins = getattr(self, "_origins", {})
            table["origin"] = np.array([origins.get(r[4].id, r[4].center) for r in rows], dtype=np.float32).reshape(
                n, 3
            )
        if frame is not None:
            table["point"] = self._grid(frame, M, centers[:, :2]).reshape(n, 2)
        return table

    # ------------------------------------------------------------------ live access
    def live_memory(self) -> SpatialMemory | None:
        return self.memory

    def live_map(self) -> np.ndarray | None:
        """The memory's medium-level map with trajectory and agent arrow (a video's right panel)."""
        if self.memory is None or self.memory.n_frames == 0:
            return None
        return self.memory.topdown("medium", trajectory=True, agent=True)


def _heading_up(frame: TopDownFrame, agent_xy: np.ndarray, heading_deg: float, size: tuple[int, int]) -> np.ndarray:
    """The 2x3 affine (pixels of ``frame`` -> pixels of the output ``size``) that turns the map about
    the agent so that its heading points up and puts the agent at the output's centre."""
    c = frame.world_to_pixel(np.asarray(agent_xy, dtype=np.float64)[None])[0]
    M = cv2.getRotationMatrix2D((float(c[0]), float(c[1])), -heading_deg, 1.0)  # cv2: positive = counter-clockwise
    h, w = size
    M[:, 2] += np.array([w / 2, h / 2]) - c
    return M


def routes_text(routes: dict[str, np.ndarray]) -> str:
    """The ``memory/routes/*`` rows in words, as the table: ``"sofa 20 deg left 4.1 m; unexplored 35 deg
    right 2.0 m"`` (``"none"`` for no route)."""
    parts = []
    for cat, d, m in zip(routes["category"], routes["direction_deg"], routes["length_m"]):
        d = float(d)
        side = "ahead" if abs(d) < 0.5 else (f"{abs(d):.0f} deg left" if d > 0 else f"{abs(d):.0f} deg right")
        parts.append(f"{cat} {side} {float(m):.1f} m")
    return "; ".join(parts) if parts else "none"


def object_table_text(table: dict[str, np.ndarray], max_rows: int | None = None) -> str:
    """The object table in words, nearest first: ``"bowl: 35 deg left, 1.2 m; plate: 10 deg right, 0.4 m"``
    (a row of ``table["target"]`` leads, as ``"[target] bowl: ..."``)."""
    parts = []
    n = len(table.get("category", ()))
    flags = table.get("target")
    for i in range(n if max_rows is None else min(n, max_rows)):
        d = float(table["direction_deg"][i])
        side = "ahead" if abs(d) < 0.5 else (f"{abs(d):.0f} deg left" if d > 0 else f"{abs(d):.0f} deg right")
        mark = "[target] " if flags is not None and bool(flags[i]) else ""
        row = f"{mark}{table['category'][i]}: {side}, {float(table['distance_m'][i]):.1f} m"
        if "origin" in table and np.linalg.norm(table["origin"][i][:2] - table["center"][i][:2]) > MOVED_M:
            dx, dy = (table["origin"][i][:2] - table["center"][i][:2]) * 100
            row += f", first seen {dx:+.0f} cm x {dy:+.0f} cm y from here"
        parts.append(row)
    return "; ".join(parts) if parts else "nothing seen yet"


MOVED_M = 0.03  # an object whose centre is this far from where it was first held has moved (the table says so)
ORIGIN_ROWS = 3  # origin_features: the named objects' rows
ORIGIN_RANGE_M = 1.5  # positions (memory frame) scaled by this; LIBERO's table lies within it
MOVE_RANGE_M = 0.5  # displacements scaled by this


def origin_features(d: dict[str, Any]) -> np.ndarray:
    """The named objects' starts as numbers (the proprio token reading ``memory/origins``): for up to
    :data:`ORIGIN_ROWS` table rows whose category's last word is a word of the instruction (``bowl`` of
    "akita black bowl"), sorted by category and id, ``[present, origin / 1.5 m (3), (origin - centre) /
    0.5 m (3)]``, clipped to [-1, 1]: where each was first held and how far it has moved since; absent
    rows are 0. ``d``: an observation dict with ``memory/objects/*`` including ``origin``."""
    from spatial_memory.queries import normalise_category

    if "memory/objects/origin" not in d:
        raise ValueError(
            "the policy reads memory/origins (inputs.proprio_keys) but the observation has no memory/objects/origin: "
            "build the memory inputs with 'objects' and 'origins' (data.memory.inputs)"
        )
    words = set(re.findall(r"[a-z]+", str(d.get("prompt", "")).lower()))
    cats = [normalise_category(str(c)) for c in np.asarray(d["memory/objects/category"]).ravel()]
    ids = [str(i) for i in np.asarray(d.get("memory/objects/id", np.array(cats))).ravel()]
    origin = np.asarray(d["memory/objects/origin"], dtype=np.float64).reshape(-1, 3)
    center = np.asarray(d["memory/objects/center"], dtype=np.float64).reshape(-1, 3)
    named = sorted((c, i, j) for j, (c, i) in enumerate(zip(cats, ids)) if c.split() and c.split()[-1] in words)
    out = np.zeros(7 * ORIGIN_ROWS, dtype=np.float32)
    for r, (_, _, j) in enumerate(named[:ORIGIN_ROWS]):
        out[7 * r] = 1.0
        out[7 * r + 1 : 7 * r + 4] = np.clip(origin[j] / ORIGIN_RANGE_M, -1, 1)
        out[7 * r + 4 : 7 * r + 7] = np.clip((origin[j] - center[j]) / MOVE_RANGE_M, -1, 1)
    return out


ROUTE_FEATURES_DIM = 14
ROUTE_RANGE_M = 5.0  # lengths and distances beyond this read as "far" (the feature saturates at 1)


def route_features(d: dict[str, Any]) -> np.ndarray:
    """The routes and the target's row as numbers, for a learned projection (the proprio token reading
    ``memory/routes``): a float32 vector of :data:`ROUTE_FEATURES_DIM`, every entry in [-1, 1], no statistics
    needed. For each of the first two routes ``[present, is_target, sin(direction), cos(direction),
    min(length, 5 m) / 5 m]``; then the table's row of the target route's category (the instruction's
    object, when the memory holds it) ``[present, sin, cos, min(distance, 5 m) / 5 m]``; absent rows are 0.
    ``d``: an observation dict with ``memory/routes/*`` (``data.memory.inputs`` with ``routes``) and, for the
    last block, ``memory/objects/*``."""
    if "memory/routes/kind" not in d:
        raise ValueError(
            "the policy reads memory/routes (inputs.proprio_keys) but the observation has no memory/routes/*: "
            "build the memory inputs with 'routes' (data.memory.inputs)"
        )
    out = np.zeros(ROUTE_FEATURES_DIM, dtype=np.float32)
    kinds = [str(k) for k in np.asarray(d["memory/routes/kind"]).ravel()]
    cats = [str(c) for c in np.asarray(d["memory/routes/category"]).ravel()]
    deg = np.asarray(d["memory/routes/direction_deg"], dtype=np.float64).ravel()
    length = np.asarray(d["memory/routes/length_m"], dtype=np.float64).ravel()
    for i in range(min(2, len(kinds))):
        a = np.radians(deg[i])
        near = min(length[i], ROUTE_RANGE_M) / ROUTE_RANGE_M
        out[5 * i : 5 * i + 5] = [1.0, kinds[i] == "target", np.sin(a), np.cos(a), near]
    target = next((c for k, c in zip(kinds, cats) if k == "target"), None)
    if target is not None and "memory/objects/category" in d:
        rows = [str(c) for c in np.asarray(d["memory/objects/category"]).ravel()]
        if target in rows:
            j = rows.index(target)
            a = np.radians(float(np.asarray(d["memory/objects/direction_deg"]).ravel()[j]))
            dist = float(np.asarray(d["memory/objects/distance_m"]).ravel()[j])
            out[10:] = [1.0, np.sin(a), np.cos(a), min(dist, ROUTE_RANGE_M) / ROUTE_RANGE_M]
    return out


@dataclass(frozen=True)
class MemoryFeature:
    """A proprio key computed from the memory's entries instead of read from the data (``inputs.proprio_keys``):
    its function of an observation dict, its width, and the memory input groups it needs. Its entries are
    already in [-1, 1], so its normalisation statistics are fixed (training computes none for it)."""

    compute: Any  # (observation dict) -> float vector of ``dim``
    dim: int
    groups: tuple[str, ...]


# every proprio key the memory computes; adding one is one entry here (the policy, its memory groups and
# the proprio statistics read this table)
MEMORY_FEATURES: dict[str, MemoryFeature] = {
    # the routes and the target's row as numbers; the last block reads the object table's target row
    "memory/routes": MemoryFeature(route_features, ROUTE_FEATURES_DIM, ("objects", "routes")),
    # where the named objects were first held, and how far they have moved (manipulation: libero_mem)
    "memory/origins": MemoryFeature(origin_features, 7 * ORIGIN_ROWS, ("objects", "origins")),
}
