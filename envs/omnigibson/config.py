"""Configuration of the ``omnigibson`` env family: every option, its default, validation, scene splits.

The Hydra group ``configs/env/omnigibson.yaml`` holds exactly these keys (plus ``name: omnigibson``);
a key that is not a field here is rejected with the list of valid ones. Nothing here imports
OmniGibson: the task list is known without it.

Scenes are the 50 BEHAVIOR-1K scenes that OmniGibson 1.1.1 ships (listed in its
``docs/modules/scenes.md``). GST-Bench's own 50 scenes are BEHAVIOR-1K scenes, but its split is not
published with it, so the split below is ours, fixed by hand before any result existed (each split
mixes houses with the other kinds of buildings):

=======  ======  ==================================================
split    scenes  use
=======  ======  ==================================================
train    35      demonstrations, GST-Train
val      5       model selection
test     10      reported numbers
=======  ======  ==================================================

``scene`` (when set) selects one scene by name, whatever its split; ``split`` is then ignored.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from envs.ground_nav.config import check_ground_nav
from vla_common.strict import from_dict

# every BEHAVIOR-1K scene of OmniGibson 1.1.1 (docs/modules/scenes.md), by split
SPLITS: dict[str, tuple[str, ...]] = {
    "test": (
        "Rs_int",
        "Beechwood_1_int",
        "Benevolence_2_int",
        "Ihlen_1_int",
        "Merom_0_int",
        "Pomaria_2_int",
        "Wainscott_1_int",
        "house_single_floor",
        "office_large",
        "restaurant_diner",
    ),
    "val": ("Benevolence_0_int", "Pomaria_0_int", "grocery_store_cafe", "hotel_suite_small", "school_biology"),
    "train": (
        "Beechwood_0_garden",
        "Beechwood_0_int",
        "Benevolence_1_int",
        "Ihlen_0_int",
        "Merom_0_garden",
        "Merom_1_int",
        "Pomaria_0_garden",
        "Pomaria_1_int",
        "Rs_garden",
        "Wainscott_0_garden",
        "Wainscott_0_int",
        "grocery_store_asian",
        "grocery_store_convenience",
        "grocery_store_half_stocked",
        "hall_arch_wood",
        "hall_conference_large",
        "hall_glass_ceiling",
        "hall_train_station",
        "hotel_gym_spa",
        "hotel_suite_large",
        "house_double_floor_lower",
        "house_double_floor_upper",
        "office_bike",
        "office_cubicles_left",
        "office_cubicles_right",
        "office_vendor_machine",
        "restaurant_asian",
        "restaurant_brunch",
        "restaurant_cafeteria",
        "restaurant_hotel",
        "restaurant_urban",
        "school_chemistry",
        "school_computer_lab_and_infirmary",
        "school_geography",
        "school_gym",
    ),
}
SCENES: tuple[str, ...] = tuple(sorted(s for names in SPLITS.values() for s in names))


def split_of(scene: str) -> str | None:
    for name, scenes in SPLITS.items():
        if scene in scenes:
            return name
    return None


@dataclass(frozen=True)
class OmniGibsonConfig:
    # which scenes and episodes -----------------------------------------------------------------
    split: str = "test"  # train | val | test (ignored when scene is set)
    scene: str | None = None  # one BEHAVIOR-1K scene by name (task 0); None = the split's scenes
    num_scenes: int | None = None  # the first num_scenes of the split (None: all of them)
    first_scene: int = 0  # index of the first scene within the split
    num_trials: int = 10  # episodes (target + start pose) per scene
    max_steps: int = 300  # per episode
    # the agent ---------------------------------------------------------------------------------
    robot: str | None = None  # None: a camera moving kinematically; else an OmniGibson robot class ("Turtlebot", ...)
    agent_radius: float = 0.2  # metres; the traversable map is eroded by it
    grid_resolution: float = 0.05  # metres per traversable-map cell (OmniGibson's trav_map_resolution)
    camera_height: float = (
        1.5  # metres above the floor (camera agent only; a robot's camera is where its model puts it)
    )
    camera_hfov_deg: float = 90.0  # horizontal field of view (pixels are square)
    camera_pitch_deg: float = 0.0  # positive looks down
    width: int = 256
    height: int = 256
    max_forward_m: float = 0.25  # action bounds: |forward| <= max_forward_m, |left| <= max_left_m,
    max_left_m: float = 0.25  # |yaw| <= max_turn_deg (the action itself is in radians)
    max_turn_deg: float = 30.0
    # object-navigation task (as env=house) -----------------------------------------------------
    success_radius_m: float = 1.0
    min_visible_fraction: float = 0.001
    min_start_distance_m: float = 2.0
    min_target_height_m: float = 0.3  # navigation targets are furniture-sized: box at least this tall ...
    min_target_area_m2: float = 0.1  # ... with at least this footprint
    stop_action: bool = False  # the ObjectNav stop protocol (a 4th action dim), as env.stop_action of env=house
    # the simulator -----------------------------------------------------------------------------
    headless: bool = True  # OMNIGIBSON_HEADLESS
    render_settle: int = 2  # og.sim.render() calls after a pose change before reading the camera
    max_depth_m: float = 30.0  # depth beyond this (or inf / NaN / <= 0) is invalid
    not_load_object_categories: tuple[str, ...] = ()  # passed to InteractiveTraversableScene
    # ground-truth top-down maps ------------------------------------------------------------------
    easy_altitude_m: float = 4.0  # the easy map: straight-down views from this height above the floor, ceilings hidden
    wall_thickness_m: float = 0.25  # walls = untraversable band this wide along the object-free traversable area
    map_cache: str | None = None  # a directory of scene maps (vla-gst generate's out/maps): TDS distractors, reuse
    render_map: bool = True  # env.render(): ego view and the easy map with the trajectory side by side

    def __post_init__(self) -> None:
        object.__setattr__(self, "not_load_object_categories", tuple(self.not_load_object_categories))

    @property
    def max_turn_rad(self) -> float:
        return math.radians(self.max_turn_deg)

    @classmethod
    def from_dict(cls, cfg: dict[str, Any] | None) -> "OmniGibsonConfig":
        out = from_dict(cls, cfg, "omnigibson env", ignore=("name",))
        out.validate()
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["not_load_object_categories"] = list(self.not_load_object_categories)
        return d

    def validate(self) -> None:
        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise ValueError(f"omnigibson env config: {msg}")

        for f in fields(self):
            v, kind = getattr(self, f.name), _KINDS[f.name]
            if v is None and f.name in _NULLABLE:
                continue
            if kind is float:
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            elif kind is int:
                ok = isinstance(v, int) and not isinstance(v, bool)
            elif kind is tuple:
                ok = all(isinstance(x, str) for x in v)
            else:
                ok = isinstance(v, kind)
            need(ok, f"{f.name} must be {kind.__name__}{' or null' if f.name in _NULLABLE else ''}, got {v!r}")
        need(self.split in SPLITS, f"split must be one of {sorted(SPLITS)}, got {self.split!r}")
        need(
            self.scene is None or self.scene in SCENES,
            f"unknown BEHAVIOR-1K scene {self.scene!r}; scenes of OmniGibson 1.1.1: {list(SCENES)}",
        )
        n = len(SPLITS[self.split])
        need(0 <= self.first_scene < n, f"first_scene must be in [0, {n}) for split {self.split!r}")
        need(
            self.num_scenes is None or 1 <= self.num_scenes <= n - self.first_scene,
            f"num_scenes must be in [1, {n - self.first_scene}] for split {self.split!r} from first_scene "
            f"{self.first_scene}, got {self.num_scenes}",
        )
        for name in ("num_trials", "max_steps", "width", "height", "render_settle"):
            need(getattr(self, name) > 0, f"{name} must be a positive int, got {getattr(self, name)!r}")
        need(0.05 <= self.agent_radius <= 0.5, f"agent_radius must be in [0.05, 0.5] m, got {self.agent_radius}")
        need(
            0.01 <= self.grid_resolution <= 0.1,
            f"grid_resolution must be in [0.01, 0.1] m (the dataset's maps are 0.01 m), got {self.grid_resolution}",
        )
        need(0.3 <= self.camera_height <= 2.4, f"camera_height must be in [0.3, 2.4] m, got {self.camera_height}")
        need(20.0 <= self.camera_hfov_deg <= 150.0, f"camera_hfov_deg must be in [20, 150], got {self.camera_hfov_deg}")
        check_ground_nav(self, need)
        need(self.max_depth_m > 0, f"max_depth_m must be > 0, got {self.max_depth_m}")
        need(2.5 <= self.easy_altitude_m <= 20.0, f"easy_altitude_m must be in [2.5, 20] m, got {self.easy_altitude_m}")
        need(
            0.05 <= self.wall_thickness_m <= 1.0,
            f"wall_thickness_m must be in [0.05, 1] m, got {self.wall_thickness_m}",
        )

    def scene_names(self) -> list[str]:
        """The BEHAVIOR-1K scene of every task, in task-id order."""
        if self.scene is not None:
            return [self.scene]
        names = SPLITS[self.split][self.first_scene :]
        return list(names if self.num_scenes is None else names[: self.num_scenes])


_NULLABLE = {"scene", "num_scenes", "robot", "map_cache"}
_KINDS: dict[str, type] = {f: float for f in OmniGibsonConfig.__dataclass_fields__}
_KINDS.update(
    {
        "split": str,
        "scene": str,
        "robot": str,
        "map_cache": str,
        "num_scenes": int,
        "first_scene": int,
        "num_trials": int,
        "max_steps": int,
        "width": int,
        "height": int,
        "render_settle": int,
        "stop_action": bool,
        "headless": bool,
        "render_map": bool,
        "not_load_object_categories": tuple,
    }
)
