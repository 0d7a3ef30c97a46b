"""Mid-episode GST questions: a rollout subscriber (docs/GST.md).

At the configured steps (``gst.every`` and/or ``gst.at``) it freezes the episode, builds questions
whose exploration video is the episode so far and whose current view is the agent's current view
(its odometry pose known, as on a real robot; targets invisible in it), asks ``agent.answer``,
scores, and lets the episode resume. Questions are made and scored from the env's exact frames; the
agent is given its own: the frames its sensors delivered (``episode.agent_observation``: under a
perception profile, noisy depth, frame-local ids and its drifting odometry poses, current pose
included). Each question and answer is returned with the episode result
(``result.extra["gst_questions"]``), which the evaluator writes to ``gst.jsonl``; the episode line gains
``gst`` (per-subtask means of that episode).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import numpy as np

from vla.rollout.runtime import Episode, EpisodeResult, Subscriber

from .generate import GenConfig, QuestionGenerator, instance_stats
from .options import GSTOptions
from .score import score_one
from vla.questions.subtasks import SUBTASKS

# what gst.jsonl keeps of a question's truth (option_scenes: which scenes' maps a TDS question showed)
ROW_META = ("target", "target_instance", "category", "level", "option_scenes")


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def gst_options(cfg: dict[str, Any] | None) -> dict[str, Any]:
    """The questioner's options with their defaults (:class:`~vla.gst.options.GSTOptions`), validated."""
    return GSTOptions.from_dict(cfg).to_dict()


def subscriber(cfg: dict[str, Any] | None) -> "GSTQuestioner | None":
    """The questioner a run's ``gst`` options ask for, or None when they leave it off (the evaluator's
    plug-in for ``gst=``: ``vla.eval.runner.EXTRAS``)."""
    return GSTQuestioner(cfg) if gst_options(cfg)["enabled"] else None


def _as_received(q, mine: dict[int, Any], agent_frames: list) -> None:
    """The question's sensor media as the agent received them (its own frames, poses and ids)."""
    if "stream" in q.media:
        q.media["stream"] = agent_frames
    if "current_sensors" in q.media:
        view = mine[id(q.media["current_sensors"])]
        q.media["current_sensors"] = view
        if q.current_pose is not None:
            q.current_pose = view.T_world_cam
    if "clip_stream" in q.media:
        q.media["clip_stream"] = [mine[id(f)] for f in q.media["clip_stream"]]


class GSTQuestioner(Subscriber):
    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        self.cfg = gst_options(cfg)
        self._pool: dict[str, dict[str, np.ndarray]] = {}

    # ------------------------------------------------------------------ schedule
    def due(self, step: int) -> bool:
        every, at = self.cfg["every"], self.cfg["at"] or []
        return step > 0 and ((every is not None and step % int(every) == 0) or step in at)

    def on_episode_start(self, episode: Episode) -> None:
        from envs.material import QuestionSource
        from envs.registry import family

        fam = family(episode.env.env_spec.family)
        if not isinstance(fam, QuestionSource):
            raise ValueError(f"env family {fam.name!r} cannot pose GST questions (it implements no QuestionSource)")
        self.source = fam
        self.cache: dict[str, Any] = {}  # the family's per-episode cache (ground-truth maps)
        self.rows: list[dict[str, Any]] = []
        self.filtered: Counter[str] = Counter()
        self.frames = []  # the env's exact frames (question material)
        self.agent_frames = []  # the same frames as the agent received them
        self._record(episode)

    def _camera(self, episode: Episode) -> str:
        cams = list(episode.observation.cameras)
        if not cams:
            raise ValueError("mid-episode GST questions need camera observations (env.render=true)")
        cam = self.cfg["camera"] or self.source.question_camera(cams)
        if cam not in cams:
            raise ValueError(f"gst.camera={cam!r} is not among the env's cameras {cams}")
        return cam

    def _record(self, episode: Episode) -> None:
        cam = self._camera(episode)
        self.frames.append(episode.observation.cameras[cam])
        agent_obs = episode.agent_observation if episode.agent_observation is not None else episode.observation
        self.agent_frames.append(agent_obs.cameras[cam])

    def on_step(self, episode, action, observation, reward, info) -> None:
        self._record(episode)
        if self.due(episode.step):
            self.ask(episode)

    # ------------------------------------------------------------------ questions
    def _material(self, episode: Episode, name: str):
        env = episode.env
        # this scene and its distractors only: a pool grown by earlier episodes of the worker would make the
        # questions depend on which episodes ran before (a resumed run would ask different ones)
        self._pool = dict(self.source.tds_pool(env, self.cache))
        return self.source.live_material(env, self.source.scene_name(env), self.frames, self.cache)

    def ask(self, episode: Episode) -> None:
        t0 = time.perf_counter()
        name = (
            f"{episode.key.get('suite', episode.key['env'])}/task{episode.key['task_id']}/trial{episode.key['trial']}"
        )
        material = self._material(episode, name)
        codes = [c for c in (self.cfg["subtasks"] or SUBTASKS) if c in material.supported]
        level = self.cfg["map_level"] if self.cfg["map_level"] in material.maps else next(iter(material.maps))
        scale = {"min_distance_m": material.min_target_distance_m} if material.min_target_distance_m else {}
        gen = QuestionGenerator(
            GenConfig(
                per_scene={c: int(self.cfg["per_subtask"]) for c in codes},
                map_level=level,
                seed=self.cfg["seed"],
                **scale,
            )
        )
        gen.start_scene(episode.step)
        view = self.frames[-1]
        quota = Counter(gen.cfg.per_scene)
        stats = instance_stats(material.frames)
        T = material.T_world_cam(view)
        questions = gen.object_questions(material, view, T, True, stats, quota) + gen.self_questions(
            material, view, T, True, quota
        )
        questions += gen.map_point_questions(material, stats, quota)
        questions += gen.tds_questions(material, self._pool, quota)
        questions += gen.traj_questions(material, quota)
        self.filtered.update(gen.filtered)
        mine = {id(f): a for f, a in zip(self.frames, self.agent_frames)}
        for q in questions:
            q.id = f"{name}/step{episode.step}/{q.subtask}/{q.id.rsplit('-', 1)[-1]}"
            _as_received(q, mine, self.agent_frames)
            try:
                text, error = episode.agent.answer(q.for_agent()), None
            except Exception as exc:  # noqa: BLE001 - a failed answer scores 0
                text, error = None, f"{type(exc).__name__}: {exc}"
            parsed, score = score_one({"subtask": q.subtask, "answer": q.answer}, text)
            self.rows.append(
                {
                    "id": q.id,
                    "step": episode.step,
                    "subtask": q.subtask,
                    "prompt": q.prompt,
                    "prediction": text,
                    "parsed": list(parsed) if isinstance(parsed, tuple) else parsed,
                    "answer": q.answer,
                    "score": score,
                    "meta": {k: _plain(q.meta[k]) for k in ROW_META if q.meta.get(k) is not None},
                    **({"error": error} if error else {}),
                }
            )
        self.seconds = getattr(self, "seconds", 0.0) + time.perf_counter() - t0

    def episode_logs(self, out) -> list:
        from pathlib import Path

        from .log import GSTLog

        return [GSTLog(Path(out) / "gst.jsonl")]

    def on_episode_end(self, episode: Episode, result: EpisodeResult) -> None:
        if not self.rows:
            result.extra["gst"] = {"questions": 0, "filtered": dict(self.filtered)}
            return
        by: dict[str, list[float]] = {}
        for r in self.rows:
            by.setdefault(r["subtask"], []).append(r["score"])
        result.extra["gst"] = {
            "questions": len(self.rows),
            "per_subtask": {c: 100 * float(np.mean(v)) for c, v in by.items()},
            "filtered": dict(self.filtered),
        }
        result.extra["gst_questions"] = self.rows
