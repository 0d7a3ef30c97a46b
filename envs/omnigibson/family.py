"""The ``omnigibson`` env family: tasks are BEHAVIOR-1K scenes, trials object-navigation episodes.

``cfg`` is the plain dict of ``configs/env/omnigibson.yaml`` without ``name``. Task ``i`` is the
i-th scene of the chosen split (from ``first_scene``), or the single scene ``scene``. ``tasks()``
needs no simulator; ``require()`` (called by the evaluator and ``vla-gst generate`` before any
work) and ``make()`` raise :class:`~.sim.OmniGibsonUnavailable` with the install steps when
OmniGibson cannot be imported. Nothing imports OmniGibson before ``make()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.base import TaskInfo

from .config import OmniGibsonConfig
from .material import OG_SUBTASKS

INSTRUCTION = "go to the named object (the target is set per trial; read obs.instruction after reset)"


class OmniGibsonFamily:
    name = "omnigibson"

    def tasks(self, cfg: dict[str, Any]) -> list[TaskInfo]:
        c = OmniGibsonConfig.from_dict(cfg)
        return [
            TaskInfo(i, f"omnigibson_{s}", INSTRUCTION, c.max_steps, c.num_trials)
            for i, s in enumerate(c.scene_names())
        ]

    def require(self, cfg: dict[str, Any]) -> None:
        from .sim import require_omnigibson

        OmniGibsonConfig.from_dict(cfg)
        require_omnigibson()

    def make(self, cfg: dict[str, Any], task_id: int):
        from .env import OmniGibsonEnv

        c = OmniGibsonConfig.from_dict(cfg)
        scenes = c.scene_names()
        if isinstance(task_id, bool) or not isinstance(task_id, (int, np.integer)) or not 0 <= task_id < len(scenes):
            raise ValueError(f"omnigibson task_id must be in [0, {len(scenes)}) for this config, got {task_id!r}")
        task_id = int(task_id)
        task = TaskInfo(task_id, f"omnigibson_{scenes[task_id]}", INSTRUCTION, c.max_steps, c.num_trials)
        return OmniGibsonEnv(c, scenes[task_id], task)

    # ------------------------------------------------------------------ GST questions (envs.material.QuestionSource)
    offline = True
    subtasks = OG_SUBTASKS

    def question_camera(self, camera_names: list[str]) -> str:
        return "ego" if "ego" in camera_names else camera_names[0]

    def scene_name(self, env) -> str:
        return env.gst_name

    def offline_tasks(self, env_cfg: dict, split: str, first: int, n: int) -> tuple[dict, list[tuple[int, str]]]:
        from .env import gst_scene_name

        cfg = {**env_cfg, "split": split, "scene": None, "first_scene": first, "num_scenes": n}
        c = OmniGibsonConfig.from_dict(cfg)
        return cfg, [(i, gst_scene_name(s, split)) for i, s in enumerate(c.scene_names())]

    def _maps(self, env, cache: dict) -> dict:
        if "maps" not in cache:
            cache["maps"] = {lvl: env.topdown_map(lvl) for lvl in ("easy", "medium", "hard")}
        return cache["maps"]

    def live_material(self, env, name: str, frames, cache: dict):
        from .material import og_live_material

        return og_live_material(env, name, frames, self._maps(env, cache))

    def tds_pool(self, env, cache: dict) -> dict:
        from .material import cached_distractor_maps

        pool = {self.scene_name(env): self._maps(env, cache)}
        for other, maps in cached_distractor_maps(env, 3):
            pool.setdefault(other, maps)
        return pool

    def offline_material(self, env, name: str, stride: int = 2, seed: int = 0):
        from .material import og_material

        return og_material(env, name, stride=stride, seed=seed)
