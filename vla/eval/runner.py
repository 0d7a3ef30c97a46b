"""What runs episodes, wherever they run: the spec of an evaluation and :class:`EpisodeRunner`.

:class:`EvalSpec` is everything a worker needs (plain data, so it crosses process boundaries);
:class:`EpisodeRunner` runs the episodes of one spec -- the agent, the subscribers, the env of the
current task -- in whichever process a backend (:mod:`vla.eval.backends`) puts it. The evaluator
(:mod:`vla.eval.evaluate`) plans, hands the episodes to a backend and writes what comes back; the
backends import this module, never the evaluator.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.registry import make_env

from ..agents import Seedable, make_agent
from ..rollout.record import DemoRecorder
from ..rollout.runtime import Subscriber, run_episode
from ..rollout.video import VIDEO_MODES, VideoWriter
from .shard import parse_shard

BACKENDS = ("local", "ray")  # where episodes run (eval.backend): the modules of vla/eval/backends/


@dataclass
class EvalSpec:
    """Everything a worker needs to run episodes (plain data, so it crosses process boundaries)."""

    env: dict[str, Any]
    agent: dict[str, Any]
    out: str
    tasks: list[int] | None = None
    trials_per_task: int | None = None  # None: the env's protocol (LIBERO: 50; apartments: env.num_trials)
    first_trial: int = 0  # trials first_trial .. first_trial + trials_per_task - 1 (e.g. held-out sampled states)
    workers: int = 1
    videos: str = "none"
    video_fps: int = 20
    video_trials: int | None = None  # film only trials first_trial .. first_trial + video_trials - 1 of each task
    seed: int = 7
    episode_timeout_s: float = 3600.0
    record: str | None = None
    record_keep: str = "success"  # success: successful episodes only | all (DAgger: every episode's states)
    merge_record: bool = True  # assemble record/<task>_demo.hdf5 at the end (vla-data merges itself)
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the gst questioner's config
    perception: dict[str, Any] | None = None  # the profile applied to what the agent receives (None: exact)
    rerun: dict[str, Any] | None = None  # live view / .rrd files (vla/rollout/rerun_view.py); not the run's identity
    backend: str = "local"  # local: this machine (workers processes) | ray: a Ray cluster (ray.* options)
    shard: str | None = None  # "k/n": only the k-th of n contiguous blocks of the plan (vla-merge joins them)
    ray: dict[str, Any] | None = None  # RayOptions (vla/eval/backends/options.py) for backend=ray; not the identity

    def __post_init__(self) -> None:
        if self.record_keep not in ("success", "all"):
            raise ValueError(f"record_keep must be success or all, got {self.record_keep!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"eval.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.shard is not None:
            parse_shard(self.shard)
        if self.videos not in VIDEO_MODES:
            raise ValueError(f"eval.videos must be one of {VIDEO_MODES}, got {self.videos!r}")
        if self.video_trials is not None and int(self.video_trials) < 1:
            raise ValueError(f"eval.video_trials must be >= 1 (or null: every episode), got {self.video_trials}")
        if int(self.workers) < 0:
            raise ValueError(f"eval.workers must be >= 0, got {self.workers}")
        if self.trials_per_task is not None and int(self.trials_per_task) < 1:
            raise ValueError(f"eval.trials_per_task must be >= 1, got {self.trials_per_task}")
        if int(self.first_trial) < 0:
            raise ValueError(f"eval.first_trial must be >= 0, got {self.first_trial}")
        if self.episode_timeout_s is not None and float(self.episode_timeout_s) <= 0:
            raise ValueError(f"eval.episode_timeout_s must be > 0, got {self.episode_timeout_s}")


# what rides on a run besides videos and recordings, by the key of the run's extras that configures it:
# plug-ins named by string, as agents are, so the evaluator never imports the harnesses built on it
# (the mid-episode GST questioner lives with the GST harness, which uses the evaluator's backends)
EXTRAS = {"gst": "vla.gst.midepisode:subscriber"}


def build_subscribers(spec: EvalSpec) -> list[Subscriber]:
    subs: list[Subscriber] = []
    for key, target in EXTRAS.items():  # before the video writer: questions freeze the episode first
        if spec.extra.get(key):
            module, attr = target.split(":")
            sub = getattr(importlib.import_module(module), attr)(spec.extra[key])
            if sub is not None:
                subs.append(sub)
    if spec.videos != "none":
        filmed = None
        if spec.video_trials is not None:
            filmed = range(int(spec.first_trial), int(spec.first_trial) + int(spec.video_trials))
        subs.append(VideoWriter(Path(spec.out) / "videos", spec.videos, spec.video_fps, filmed))
    if spec.record:
        subs.append(DemoRecorder(spec.record, spec.record_keep))
    if spec.rerun and spec.rerun.get("enabled"):
        from ..rollout.rerun_view import RerunView

        subs.append(RerunView(Path(spec.out) / "rerun", spec.rerun))
    return subs


def suite_name(env_cfg: dict[str, Any]) -> str:
    if env_cfg.get("seed") is not None:
        return f"{env_cfg['name']}/seed{env_cfg['seed']}"
    for k in ("suite", "split"):
        if env_cfg.get(k) is not None:
            return f"{env_cfg['name']}/{env_cfg[k]}" if k == "split" else str(env_cfg[k])
    return str(env_cfg["name"])


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and (when loaded) torch's global generators, as OpenVLA's
    ``set_seed_everywhere`` does at the start of ``run_libero_eval``. LIBERO's env then re-seeds
    numpy once per task env (``env.env_seed``, 0 as OpenVLA), so this governs our RNGs only."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)  # for processes started from here
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


class EpisodeRunner:
    """Runs episodes of one spec; keeps the env of the current task alive between episodes."""

    def __init__(self, spec: EvalSpec) -> None:
        self.spec = spec
        seed_everything(spec.seed)
        self.agent = make_agent(spec.agent, seed=spec.seed)
        self.subscribers = build_subscribers(spec)
        self._env = None
        self._task: int | None = None

    def run(self, task_id: int, trial: int, task_name: str) -> dict[str, Any]:
        key = {
            "env": self.spec.env["name"],
            "suite": suite_name(self.spec.env),
            "task_id": task_id,
            "task": task_name,
            "trial": trial,
        }
        error = None
        try:
            if self._task != task_id:
                self.close()
                self._env = make_env(self.spec.env, task_id)
                self._task = task_id
        except Exception as exc:  # noqa: BLE001 - a broken task fails its episodes, not the run
            error = f"{type(exc).__name__}: {exc}"
        if error is not None:  # not a result of the policy: not counted, run again by the next run
            return {
                **key,
                "success": False,
                "steps": 0,
                "seconds": 0.0,
                "error": f"env construction failed: {error}",
                "infra": "env_construction",
            }
        if isinstance(self.agent, Seedable):
            self.agent.seed((self.spec.seed, task_id, trial))
        result = run_episode(
            self._env, self.agent, key, self.subscribers, seed=self.spec.seed, perception=self.spec.perception
        )
        rec = {
            **key,
            "success": result.success,
            "steps": result.steps,
            "seconds": round(result.seconds, 3),
            "error": result.error,
            **result.extra,
        }
        if result.infra is not None:
            rec["infra"] = result.infra
            if result.stops_run:
                rec["stops_run"] = True
        return rec

    def close(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            finally:
                self._env, self._task = None, None
