"""The ``libero`` env family: config keys, task list, env construction."""

from __future__ import annotations

from typing import Any

from ..base import TaskInfo
from . import suites
from .env import LiberoEnv

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
}


def _options(cfg: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(cfg) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown libero option(s) {unknown}; valid options: {sorted(DEFAULTS)}")
    return {**DEFAULTS, **cfg}


class LiberoFamily:
    name = "libero"

    def tasks(self, cfg: dict[str, Any]) -> list[TaskInfo]:
        opts = _options(cfg)
        return suites.task_infos(suites.check_suite(opts["suite"]), opts["max_steps"])

    def make(self, cfg: dict[str, Any], task_id: int) -> LiberoEnv:
        opts = _options(cfg)
        suite = opts.pop("suite")
        opts["cameras"] = tuple(opts["cameras"])
        return LiberoEnv(suite, task_id, **opts)
