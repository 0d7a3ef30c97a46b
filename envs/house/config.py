"""Configuration of the ``house`` env family: every option, its default, validation, seed splits.

The Hydra group ``configs/env/house.yaml`` holds exactly these keys (plus ``name: house``); a key
that is not a field here is rejected with the list of valid ones. Scene seeds are split into
disjoint ranges so that training never sees a validation or test apartment:

=======  ==========================  =========================
split    scene seeds                 use
=======  ==========================  =========================
train    0 <= s < 800_000            demonstrations, GST-Train
val      800_000 <= s < 801_000      model selection
test     900_000 <= s < 901_000      reported numbers
=======  ==========================  =========================

``seed`` (when set) selects one scene directly, whatever its range; ``split`` is then ignored.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from envs.ground_nav.config import check_ground_nav

from vla_common.strict import from_dict

SPLITS: dict[str, tuple[int, int]] = {
    "train": (0, 800_000),
    "val": (800_000, 801_000),
    "test": (900_000, 901_000),
}


def split_of(seed: int) -> str | None:
    """The split a scene seed belongs to (None if it lies in no split's range)."""
    for name, (lo, hi) in SPLITS.items():
        if lo <= seed < hi:
            return name
    return None


def split_seeds(split: str, count: int) -> list[int]:
    """The first ``count`` scene seeds of a split."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(SPLITS)}")
    lo, hi = SPLITS[split]
    if not 0 < count <= hi - lo:
        raise ValueError(f"num_scenes must be in [1, {hi - lo}] for split {split!r}, got {count}")
    return list(range(lo, lo + count))


@dataclass(frozen=True)
class HouseConfig:
    # which scenes and episodes -----------------------------------------------------------------
    split: str = "test"  # train | val | test (ignored when seed is set)
    seed: int | None = None  # one scene by its seed (task 0); None = the first num_scenes of split
    num_scenes: int = 10  # tasks = scenes of the split
    num_trials: int = 10  # episodes (target + start pose) per scene
    max_steps: int = 300  # per episode
    # apartment generation ----------------------------------------------------------------------
    min_rooms: int = 4
    max_rooms: int = 8
    min_side_m: float = 8.0  # footprint side lengths are drawn from [min_side_m, max_side_m]
    max_side_m: float = 14.0
    min_objects: int = 10  # small objects on furniture
    max_objects: int = 30
    use_meshes: bool = True  # LIBERO furniture meshes where they fit (else boxes/cylinders only)
    # agent and camera --------------------------------------------------------------------------
    agent_radius: float = 0.2  # metres; the navigable grid is computed for this radius
    grid_resolution: float = 0.05  # metres per navigable-grid cell
    camera_height: float = 1.5  # metres above the floor
    camera_fovy: float = 90.0  # vertical field of view, degrees
    camera_pitch_deg: float = 0.0  # positive looks down
    width: int = 256  # ego image size
    height: int = 256
    max_forward_m: float = 0.25  # action bounds: |forward| <= max_forward_m, |left| <= max_left_m,
    max_left_m: float = 0.25  # |yaw| <= max_turn_deg (the action itself is in radians)
    max_turn_deg: float = 30.0
    # object-navigation task --------------------------------------------------------------------
    success_radius_m: float = 1.0  # horizontal distance from the agent to the target's box
    min_visible_fraction: float = 0.001  # target pixels / image pixels that count as "visible"
    min_start_distance_m: float = 2.0  # geodesic distance from the start to the goal region
    stop_action: bool = False  # ObjectNav protocol (Habitat): a 4th action dim `stop` (> 0.5 = stop); success only
    #                            when the agent stops within success_radius_m with the target in view
    # video ---------------------------------------------------------------------------------------
    render_map: bool = True  # env.render(): ego view and top-down map with trajectory side by side

    @property
    def max_turn_rad(self) -> float:
        return math.radians(self.max_turn_deg)

    @classmethod
    def from_dict(cls, cfg: dict[str, Any] | None) -> "HouseConfig":
        out = from_dict(cls, cfg, "house env", ignore=("name",))
        out.validate()
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validate(self) -> None:
        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise ValueError(f"house env config: {msg}")

        for f in fields(self):
            v = getattr(self, f.name)
            kind = _KINDS[f.name]
            if kind is float:
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            elif kind is int:
                ok = isinstance(v, int) and not isinstance(v, bool)
            else:
                ok = isinstance(v, kind)
            if f.name == "seed" and v is None:
                ok = True
            need(ok, f"{f.name} must be {kind.__name__}{' or null' if f.name == 'seed' else ''}, got {v!r}")
        need(self.split in SPLITS, f"split must be one of {sorted(SPLITS)}, got {self.split!r}")
        need(
            self.seed is None or (isinstance(self.seed, int) and self.seed >= 0),
            f"seed must be a non-negative int or null, got {self.seed!r}",
        )
        for name in ("num_scenes", "num_trials", "max_steps", "min_rooms", "max_rooms", "width", "height"):
            v = getattr(self, name)
            need(isinstance(v, int) and not isinstance(v, bool) and v > 0, f"{name} must be a positive int, got {v!r}")
        need(
            self.seed is not None or self.num_scenes <= SPLITS[self.split][1] - SPLITS[self.split][0],
            f"num_scenes={self.num_scenes} exceeds the {self.split} split",
        )
        need(
            2 <= self.min_rooms <= self.max_rooms <= 12,
            f"need 2 <= min_rooms <= max_rooms <= 12, got {self.min_rooms}, {self.max_rooms}",
        )
        need(
            4.0 <= self.min_side_m <= self.max_side_m <= 30.0,
            f"need 4 <= min_side_m <= max_side_m <= 30, got {self.min_side_m}, {self.max_side_m}",
        )
        # BSP rooms are at least 2.4 m wide: max_rooms must fit into the smallest footprint
        need(
            self.max_rooms * 2.6**2 <= 0.9 * self.min_side_m**2,
            f"max_rooms={self.max_rooms} rooms of >= 2.6 m per side cannot fit a {self.min_side_m} m footprint",
        )
        need(
            0 <= self.min_objects <= self.max_objects <= 60,
            f"need 0 <= min_objects <= max_objects <= 60, got {self.min_objects}, {self.max_objects}",
        )
        need(
            0.05 <= self.agent_radius <= 0.35,
            f"agent_radius must be in [0.05, 0.35] m (doors are 0.9-1.1 m wide), got {self.agent_radius}",
        )
        need(
            0.01 <= self.grid_resolution <= 0.1, f"grid_resolution must be in [0.01, 0.1] m, got {self.grid_resolution}"
        )
        need(
            0.3 <= self.camera_height <= 2.4,
            f"camera_height must be in [0.3, 2.4] m (ceiling at 2.6 m), got {self.camera_height}",
        )
        need(20.0 <= self.camera_fovy <= 150.0, f"camera_fovy must be in [20, 150] degrees, got {self.camera_fovy}")
        check_ground_nav(self, need)

    def scene_seeds(self) -> list[int]:
        """Scene seed of every task, in task-id order."""
        if self.seed is not None:
            return [int(self.seed)]
        return split_seeds(self.split, self.num_scenes)


_KINDS: dict[str, type] = {
    "split": str,
    "seed": int,
    "num_scenes": int,
    "num_trials": int,
    "max_steps": int,
    "min_rooms": int,
    "max_rooms": int,
    "min_side_m": float,
    "max_side_m": float,
    "min_objects": int,
    "max_objects": int,
    "use_meshes": bool,
    "agent_radius": float,
    "grid_resolution": float,
    "camera_height": float,
    "camera_fovy": float,
    "camera_pitch_deg": float,
    "width": int,
    "height": int,
    "max_forward_m": float,
    "max_left_m": float,
    "max_turn_deg": float,
    "success_radius_m": float,
    "min_visible_fraction": float,
    "min_start_distance_m": float,
    "render_map": bool,
    "stop_action": bool,
}
