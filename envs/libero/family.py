"""The ``libero`` env family: config keys, task list, env construction."""

from __future__ import annotations

from typing import Any

from ..base import TaskInfo
from . import suites
from .config import LiberoConfig
from .env import LiberoEnv
from .material import LIBERO_SUBTASKS, libero_live_material


# sampled init states per task of each split of spatial-perception questions (vla-data spatial)
SPATIAL_TRIALS = {"train": (0, 6000), "val": (6000, 8000), "test": (8000, 10000)}


def _options(cfg: dict[str, Any]) -> dict[str, Any]:
    return LiberoConfig.from_dict(cfg).to_dict()


class LiberoFamily:
    name = "libero"

    def resolve(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """The options a run's identity holds; ``perturb``, ``render_quality`` and ``instruction`` only when
        not their default, so that runs recorded before the options existed still resume."""
        opts = _options(cfg)
        opts["cameras"] = list(opts["cameras"])
        if not opts["perturb"]:
            del opts["perturb"]
        if opts["render_quality"] == "default":
            del opts["render_quality"]
        if opts["instruction"] == "own":
            del opts["instruction"]
        return opts

    def tasks(self, cfg: dict[str, Any]) -> list[TaskInfo]:
        from dataclasses import replace

        from .config import SAMPLED_TRIALS

        opts = _options(cfg)
        infos = suites.task_infos(suites.check_suite(opts["suite"]), opts["max_steps"])
        if opts["init_states"] == "sampled":
            infos = [replace(t, num_trials=SAMPLED_TRIALS) for t in infos]
        if opts["instruction"] == "distractor":  # each scene with another task's instruction
            from .language import distractor

            names = [t.instruction for t in suites.task_infos(opts["suite"])]
            infos = [replace(t, instruction=names[distractor(opts["suite"], t.task_id)[0]]) for t in infos]
        return infos

    def protocol_trials(self, cfg: dict[str, Any]) -> int:
        """50 trials per task, as OpenVLA, openpi and VST evaluate (also with sampled init states)."""
        return suites.TRIALS_PER_TASK

    def make(self, cfg: dict[str, Any], task_id: int) -> LiberoEnv:
        opts = _options(cfg)
        suite = opts.pop("suite")
        opts["cameras"] = tuple(opts["cameras"])
        return LiberoEnv(suite, task_id, **opts)

    def demo_layout(self):
        """Official LIBERO files and older recordings without an EnvSpec (envs.registry.HasDemoLayout)."""
        from .demo_layout import LAYOUT

        return LAYOUT

    def spatial_scenes(self, split: str, first: int, n: int, resolution: int, options: dict[str, Any]):
        """A suite's tabletops for spatial-perception questions (envs.registry.HasSpatialScenes): its tasks
        (``libero_tasks``: some of them) with sampled init states, never the official ones, each split a
        disjoint range of trials (:data:`SPATIAL_TRIALS`); scene ``i`` is task ``i mod tasks``."""
        suite = suites.check_suite(options.get("suite", "libero_goal"))
        ids = list(range(len(suites.task_infos(suite))))
        chosen = options.get("libero_tasks")
        if chosen is not None:
            bad = [t for t in chosen if t not in ids]
            if bad or not chosen:
                raise ValueError(f"libero_tasks {list(chosen)}: {suite} has task ids 0..{len(ids) - 1}")
            ids = [int(t) for t in chosen]
        lo, hi = SPATIAL_TRIALS[split]
        if first + n > len(ids) * (hi - lo):
            raise ValueError(f"{suite} has {len(ids) * (hi - lo)} {split} scenes; first_scene + scenes = {first + n}")
        env = {"name": "libero", "suite": suite, "init_states": "sampled", "resolution": resolution}
        env.update(cameras=["agentview"], depth=True, segmentation=True)
        out = []
        for i in range(first, first + n):
            task, trial = ids[i % len(ids)], lo + i // len(ids)
            out.append({"name": f"libero/{suite}/task{task}/trial{trial}", "env": env, "task": task, "trial": trial})
        return out

    # ------------------------------------------------------------------ GST questions (envs.material.QuestionSource)
    offline = False
    subtasks = LIBERO_SUBTASKS

    def question_camera(self, camera_names: list[str]) -> str:
        # the agentview camera sees the whole table: nothing is ever out of its view
        return "wrist" if "wrist" in camera_names else camera_names[0]

    def scene_name(self, env) -> str:
        return f"{env.suite}/task{env.task_id}"

    def live_material(self, env, name: str, frames, cache: dict):
        return libero_live_material(env, name, frames)

    def tds_pool(self, env, cache: dict) -> dict:
        return {}  # no TDS questions on a tabletop (docs/GST.md)

    def offline_tasks(self, env_cfg: dict, split: str, first: int, n: int):
        raise ValueError("LIBERO supports mid-episode GST questions only (docs/GST.md); offline sets need env=house")

    def offline_material(self, env, name: str, stride: int = 2, seed: int = 0):
        raise ValueError("LIBERO supports mid-episode GST questions only (docs/GST.md); offline sets need env=house")
