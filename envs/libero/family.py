"""The ``libero`` env family: config keys, task list, env construction."""

from __future__ import annotations

from typing import Any

from ..base import TaskInfo
from . import suites
from .env import LiberoEnv
from .material import LIBERO_SUBTASKS, libero_live_material

DEFAULTS: dict[str, Any] = {
    "suite": "libero_spatial",
    "resolution": 256,
    "cameras": ["agentview", "wrist"],
    "render": True,
    "depth": True,
    "segmentation": True,
    "orientation": "rot180",
    "settle_steps": suites.SETTLE_STEPS,
    "max_steps": None,
    "controller": "OSC_POSE",
    "hard_reset": True,
    "env_seed": suites.ENV_SEED,
}


def _options(cfg: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(cfg) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown libero option(s) {unknown}; valid options: {sorted(DEFAULTS)}")
    return {**DEFAULTS, **cfg}


class LiberoFamily:
    name = "libero"

    def resolve(self, cfg: dict[str, Any]) -> dict[str, Any]:
        opts = _options(cfg)
        opts["cameras"] = list(opts["cameras"])
        return opts

    def tasks(self, cfg: dict[str, Any]) -> list[TaskInfo]:
        opts = _options(cfg)
        return suites.task_infos(suites.check_suite(opts["suite"]), opts["max_steps"])

    def make(self, cfg: dict[str, Any], task_id: int) -> LiberoEnv:
        opts = _options(cfg)
        suite = opts.pop("suite")
        opts["cameras"] = tuple(opts["cameras"])
        return LiberoEnv(suite, task_id, **opts)

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

    def offline_material(self, env, name: str, stride: int = 2, seed: int = 0):
        raise ValueError("LIBERO supports mid-episode GST questions only (docs/GST.md); offline sets need env=house")
