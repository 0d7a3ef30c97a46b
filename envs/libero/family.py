"""The ``libero`` env family: config keys, task list, env construction."""

from __future__ import annotations

from typing import Any

from ..base import TaskInfo
from . import suites
from .config import LiberoConfig
from .env import LiberoEnv
from .material import LIBERO_SUBTASKS, libero_live_material


def _options(cfg: dict[str, Any]) -> dict[str, Any]:
    return LiberoConfig.from_dict(cfg).to_dict()


class LiberoFamily:
    name = "libero"

    def resolve(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """The options a run's identity holds; ``perturb`` only when set, so that runs recorded before
        the option existed (the nominal scene) still resume."""
        opts = _options(cfg)
        opts["cameras"] = list(opts["cameras"])
        if not opts["perturb"]:
            del opts["perturb"]
        return opts

    def tasks(self, cfg: dict[str, Any]) -> list[TaskInfo]:
        from dataclasses import replace

        from .config import SAMPLED_TRIALS

        opts = _options(cfg)
        infos = suites.task_infos(suites.check_suite(opts["suite"]), opts["max_steps"])
        if opts["init_states"] == "sampled":
            infos = [replace(t, num_trials=SAMPLED_TRIALS) for t in infos]
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
