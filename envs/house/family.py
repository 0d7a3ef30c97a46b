"""The ``house`` env family: tasks are apartments (scenes), trials are object-navigation episodes.

``cfg`` is the plain dict of ``configs/env/house.yaml`` without ``name``. Task ``i`` is the i-th
scene seed of the chosen split (or the single scene ``seed``); each task has ``num_trials`` trials
(``reset(options={"trial": k})``), whose target and start depend only on (scene seed, k). The
instruction differs per trial: read it from ``obs.instruction`` / ``env.instruction`` after reset.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.base import TaskInfo

from .config import HouseConfig
from .material import HOUSE_SUBTASKS

INSTRUCTION = "go to the named object (the target is set per trial; read obs.instruction after reset)"


class HouseFamily:
    name = "house"

    def categories(self):
        """What a detector in the apartments confuses (similar classes of the catalog) and may hallucinate."""
        from spatial_memory.perception import CategoryModel

        from .catalog import HOUSE_CONFUSABLE, all_categories

        return CategoryModel.from_groups(HOUSE_CONFUSABLE, tuple(all_categories()))

    def tasks(self, cfg: dict[str, Any]) -> list[TaskInfo]:
        c = HouseConfig.from_dict(cfg)
        return [
            TaskInfo(
                task_id=i, name=f"house_{s}", instruction=INSTRUCTION, max_steps=c.max_steps, num_trials=c.num_trials
            )
            for i, s in enumerate(c.scene_seeds())
        ]

    def make(self, cfg: dict[str, Any], task_id: int):
        from .env import HouseEnv  # imports MuJoCo; keep `tasks()` light

        c = HouseConfig.from_dict(cfg)
        seeds = c.scene_seeds()
        if isinstance(task_id, bool) or not isinstance(task_id, (int, np.integer)) or not 0 <= task_id < len(seeds):
            raise ValueError(f"house task_id must be in [0, {len(seeds)}) for this config, got {task_id!r}")
        task_id = int(task_id)
        task = TaskInfo(task_id, f"house_{seeds[task_id]}", INSTRUCTION, c.max_steps, c.num_trials)
        return HouseEnv(c, seeds[task_id], task)

    def demo_layout(self):
        """Older recordings without an EnvSpec (envs.registry.HasDemoLayout)."""
        from .demo_layout import LAYOUT

        return LAYOUT

    def spatial_scenes(self, split: str, first: int, n: int, resolution: int, options: dict[str, Any]):
        """Apartments of a split for spatial-perception questions (envs.registry.HasSpatialScenes)."""
        from .config import SPLITS

        lo, hi = SPLITS[split]
        if first + n > hi - lo:
            raise ValueError(f"house split {split!r} has {hi - lo} scenes; first_scene + scenes = {first + n}")
        env = {"name": "house", "width": resolution, "height": resolution, "render_map": False}
        env.update(use_meshes=bool(options.get("use_meshes", True)), split=split, seed=None, num_scenes=first + n)
        return [{"name": f"house/{split}/{lo + i}", "env": env, "task": i, "trial": 0} for i in range(first, first + n)]

    # ------------------------------------------------------------------ GST questions (envs.material.QuestionSource)
    offline = True
    subtasks = HOUSE_SUBTASKS

    def question_camera(self, camera_names: list[str]) -> str:
        return "ego" if "ego" in camera_names else camera_names[0]

    def scene_name(self, env) -> str:
        from .config import split_of

        return f"house/{split_of(env.scene.seed) or env.cfg.split}/{env.scene.seed}"

    def offline_tasks(self, env_cfg: dict, split: str, first: int, n: int) -> tuple[dict, list[tuple[int, str]]]:
        cfg = {**env_cfg, "split": split, "seed": None, "num_scenes": first + n}
        tasks = self.tasks({k: v for k, v in cfg.items() if k != "name"})[first : first + n]
        return cfg, [(t.task_id, f"house/{split}/{t.name.split('_')[-1]}") for t in tasks]

    def live_material(self, env, name: str, frames, cache: dict):
        from .material import house_live_material

        if "maps" not in cache:
            cache["maps"] = {lvl: env.topdown_map(lvl) for lvl in ("easy", "medium", "hard")}
        return house_live_material(env, name, frames, maps=cache["maps"])

    def tds_pool(self, env, cache: dict) -> dict:
        from .material import house_distractor_maps

        if "maps" not in cache:
            cache["maps"] = {lvl: env.topdown_map(lvl) for lvl in ("easy", "medium", "hard")}
        pool = {self.scene_name(env): cache["maps"]}
        for other, maps in house_distractor_maps(env, 3):
            pool.setdefault(other, maps)
        return pool

    def offline_material(self, env, name: str, stride: int = 2, seed: int = 0):
        from .material import house_material

        return house_material(env, name, stride=stride, seed=seed)
