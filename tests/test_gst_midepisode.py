"""Mid-episode GST questions (vla/gst/midepisode.py) on a real apartment episode and through vla-rollout.

The questions are checked against the env's own scene truth and observations, independently of the
generator: targets are absent from the agent's current view, distances and directions match the
geometry of the true pose, and the memory agent answers them from what it saw.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from envs.registry import make_env
from spatial_memory.geometry import camera_yaw, wrap_deg
from tests.conftest import ROOT, cli_env
from vla.agents import make_agent
from vla.gst.midepisode import GSTQuestioner
from vla.questions.subtasks import SUBTASKS
from vla.rollout.runtime import Subscriber, run_episode

SEED = 900003
STEP = 30


class Views(Subscriber):
    """Keeps every ego observation of the episode (what the questioner's current view must be)."""

    def on_episode_start(self, episode) -> None:
        self.frames = [episode.observation.cameras["ego"]]

    def on_step(self, episode, action, observation, reward, info) -> None:
        self.frames.append(observation.cameras["ego"])


@pytest.fixture(scope="module")
def episode():
    env = make_env({"name": "house", "seed": SEED, "max_steps": STEP + 1})
    try:
        agent = make_agent({"name": "memory"}, seed=0)
        views = Views()
        # the questioner is last: when it asks at a step, every other subscriber has seen that step
        result = run_episode(
            env, agent, {"env": "house", "task_id": 0, "trial": 0}, [views, GSTQuestioner({"at": [STEP]})], seed=7
        )
        truth = env.scene_truth()
        yield result, views.frames, truth
    finally:
        env.close()


def test_questions_are_asked_at_the_step_and_scored(episode):
    result, frames, truth = episode
    assert result.error is None, result.error
    rows = result.extra["gst_questions"]
    assert rows and {r["step"] for r in rows} == {STEP}
    assert {r["subtask"] for r in rows} <= set(SUBTASKS)
    assert len({r["subtask"] for r in rows}) >= 8  # apartments support all 12; a short episode may lack Traj clips
    for r in rows:
        assert 0.0 <= r["score"] <= 1.0 and r["prediction"] is not None, r
    gst = result.extra["gst"]
    assert gst["questions"] == len(rows)


def test_targets_are_invisible_and_answers_match_the_true_geometry(episode):
    result, frames, truth = episode
    view = frames[STEP]
    T_world_cam = truth.T_world_odom @ view.T_world_cam
    objects = {o.id: o for o in truth.objects}
    checked = 0
    for r in result.extra["gst_questions"]:
        if r["subtask"] not in ("EDv", "EDs", "EDistv", "EDists"):
            continue
        obj = objects[r["meta"]["target"]]
        assert obj.instance_id == r["meta"]["target_instance"]
        assert not np.any(view.instance == obj.instance_id), f"{r['id']}: target visible in the current view"
        d = obj.position[:2] - T_world_cam[:2, 3]
        if r["subtask"].startswith("EDist"):
            assert r["answer"]["value"] == pytest.approx(math.hypot(*d), abs=0.051)
        else:
            bearing = wrap_deg(math.degrees(math.atan2(d[1], d[0]) - camera_yaw(T_world_cam)))
            assert abs(wrap_deg(r["answer"]["value"] - bearing)) <= 1.0
        checked += 1
    assert checked >= 3


def test_memory_agent_answers_from_its_own_map(episode):
    result, _, _ = episode
    scores = [r["score"] for r in result.extra["gst_questions"]]
    assert np.mean(scores) >= 0.8, result.extra["gst"]


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_killed_run_resumes_asking_exactly_the_missing_questions(tmp_path):
    """vla-rollout killed with SIGKILL while its second episode runs, then resumed: its gst.jsonl holds
    the same questions and answers as an uninterrupted run's, each once, the first episode's untouched.
    Two apartments, so the TDS distractor pool of the second one must not depend on what ran before."""
    args = [
        "env=house",
        "env.split=test",
        "env.num_scenes=2",
        "env.max_steps=21",
        "eval.tasks=[0,1]",
        "eval.trials_per_task=1",
        "agent=random",
        "gst.at=[20]",
        "gst.subtasks=[EDs,GPs,TDS-M]",
        "eval.workers=0",
        "progress=false",
    ]

    def cmd(out):
        return [sys.executable, "-m", "vla.cli.rollout", *args, f"out={out}"]

    ref = subprocess.run(cmd(tmp_path / "ref"), cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr[-3000:]
    reference = _jsonl(tmp_path / "ref" / "gst.jsonl")

    out = tmp_path / "run"
    proc = subprocess.Popen(cmd(out), cwd=ROOT, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    episodes = out / "episodes.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (episodes.exists() and episodes.read_text().count("\n") >= 1):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = {(e["task_id"], e["trial"]) for e in _jsonl(episodes)}
    assert finished == {(0, 0)}, "the kill came too late: the second episode had finished"
    kept = []  # the finished episode's rows come first (the episode in flight may have written some: they must go)
    for line in (out / "gst.jsonl").read_text().splitlines():
        try:
            if (json.loads(line)["task_id"], json.loads(line)["trial"]) not in finished:
                break
        except ValueError:  # a torn last line
            break
        kept.append(line)
    assert kept

    r = subprocess.run(cmd(out), cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = (out / "gst.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert lines[: len(kept)] == kept  # the finished episode's questions stay as they were, first
    asked = rows[len(kept) :]
    assert {(x["task_id"], x["trial"]) for x in asked} == {(1, 0)}  # only the missing episode's questions
    assert len({x["id"] for x in rows}) == len(rows)  # nothing twice

    def content(x):
        return json.dumps({k: x[k] for k in ("id", "prompt", "answer", "prediction", "parsed", "score", "meta")})

    assert sorted(map(content, rows)) == sorted(map(content, reference))
    eps = _jsonl(episodes)
    assert sorted((e["task_id"], e["trial"]) for e in eps) == [(0, 0), (1, 0)]
    assert len(rows) == sum(e["gst"]["questions"] for e in eps)
    assert {x["subtask"] for x in rows} == {"EDs", "GPs", "TDS-M"} and all(x["step"] == 20 for x in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert sum(summary["gst"]["count"].values()) == len(rows)
    assert summary["gst"]["overall"] == pytest.approx(
        np.mean(
            [100 * np.mean([x["score"] for x in rows if x["subtask"] == c]) for c in summary["gst"]["per_subtask"]]
        ),
        abs=0.01,
    )


@pytest.mark.slow
def test_libero_mid_episode_asks_only_the_supported_subtasks(tmp_path):
    """A real LIBERO episode (rendered, ~1 min): questions at step 10 from the wrist camera's stream."""
    out = tmp_path / "libero"
    cmd = [
        sys.executable,
        "-m",
        "vla.cli.rollout",
        "env=libero",
        "env.suite=libero_spatial",
        "eval.tasks=[0]",
        "eval.trials_per_task=1",
        "env.max_steps=11",
        "agent=memory",
        "gst.at=[10]",
        "eval.workers=0",
        "progress=false",
        f"out={out}",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "gst.jsonl").read_text().splitlines()]
    assert rows and {r["subtask"] for r in rows} <= {"EDv", "EDs", "EDistv", "EDists", "GPv", "GPs", "Pos"}
    assert all(0.0 <= r["score"] <= 1.0 for r in rows)


def test_registration_is_redone_when_the_live_memory_grows():
    """Mid-episode the same map image is shown at every checkpoint while the memory grows: a
    registration of the early, partial memory must not be reused later."""
    from spatial_memory import SpatialMemory
    from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera
    from spatial_memory.topdown import TopDownFrame
    from vla.questions.answering import MemoryAnswerer

    scene = apartment_scene()
    K = default_camera(48, 48)
    x0, y0, x1, y1 = scene.bounds
    image = scene.topdown("medium", TopDownFrame(x0 - 0.5, y0 - 0.5, x1 + 0.5, y1 + 0.5))
    mem, answerer = SpatialMemory(0.05), MemoryAnswerer()
    tour = apartment_tour(24)
    for i, T in enumerate(tour[:8]):
        mem.integrate(scene.render(T, K, 48, 48, step=i))
    early = answerer.registration(mem, image, "medium")
    assert answerer.registration(mem, image, "medium") is early  # same state: cached
    assert answerer.registration(mem, image.copy(), "medium") is early  # keyed by contents, not the array
    view = scene.render(tour[20], K, 48, 48, step=99)
    loc = answerer._localize(mem, view)
    assert answerer._localize(mem, scene.render(tour[20], K, 48, 48, step=99)) is loc  # equal view: localised once
    for i, T in enumerate(tour[8:], start=8):
        mem.integrate(scene.render(T, K, 48, 48, step=i))
    later = answerer.registration(mem, image, "medium")
    assert later is not early
    assert answerer._localize(mem, view) is not loc  # a localisation is of one memory state too
    # what registration keeps of the memory itself (its map's points) is of the grown memory: the
    # result is the one computed from scratch (a snapshot starts with nothing kept)
    fresh = mem.snapshot().register_topdown(image, "medium")
    assert (fresh.scale, fresh.theta, fresh.score) == (later.scale, later.theta, later.score)
    assert later.score >= early.score - 0.05  # the fuller memory explains the map at least as well
    assert answerer.registration(mem.snapshot(), image, "medium") is later  # a snapshot is the same state
    # detector boxes change the memory without a frame: the cache must notice that too
    n = mem.n_frames
    mem.integrate_boxes([("sofa", [0.0, 0.0, 2.0, 1.0, 0.5, 0.8, 0.0, 0.0, 0.0])], tour[-1], step=n)
    assert mem.n_frames == n and answerer.registration(mem, image, "medium") is not later


def test_targets_missing_from_the_registry_are_located_from_their_pixels(episode):
    """The answerer's fallback (a target the memory's registry does not hold) on the real episode's
    stream: the median of the target's back-projected pixels lands on the true object."""
    from vla.questions.answering import _locate_in_stream

    result, frames, truth = episode
    T_odom_world = np.linalg.inv(truth.T_world_odom)
    seen = {}
    for f in frames:
        ids, counts = np.unique(f.instance[f.instance > 0], return_counts=True)
        for i, c in zip(ids, counts):
            seen[int(i)] = seen.get(int(i), 0) + int(c)
    objects = [o for o in truth.objects if seen.get(o.instance_id, 0) >= 300]
    assert len(objects) >= 3
    poses = np.stack([f.T_world_cam for f in frames])  # the frames' own (exact, odometry-frame) poses
    for o in objects[:6]:
        p = _locate_in_stream(frames, poses, None, lambda f, i=o.instance_id: [i])
        centre = (T_odom_world @ np.r_[o.position, 1.0])[:3]
        half = np.asarray(o.box.size) / 2
        assert np.all(np.abs(p[:2] - centre[:2]) <= np.max(half[:2]) + 0.1), (o.id, p, centre)


def test_mid_episode_questions_use_the_live_memory_and_never_a_stale_one():
    """Mid-episode the question's stream is the episode so far (a list that grows between
    checkpoints): questions without a pose (GP, TDS, Traj) must see the whole episode so far too."""
    from spatial_memory import SpatialMemory
    from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera
    from vla.questions.answering import MemoryAnswerer
    from vla.questions.question import Question

    scene, K = apartment_scene(), default_camera(32, 32)
    frames = [scene.render(T, K, 32, 32, step=i) for i, T in enumerate(apartment_tour(12))]
    stream = frames[:4]  # the questioner's list, as it stands at the first checkpoint
    q = Question(
        id="q", subtask="GPs", scene="s", prompt="", media={"stream": stream, "map": np.zeros((8, 8, 3), np.uint8)}
    )
    answerer = MemoryAnswerer()
    assert answerer.memory_for(q).n_frames == 4  # no live memory: built from the stream
    stream.extend(frames[4:])  # the episode goes on; the same list object grows
    assert answerer.memory_for(q).n_frames == 12
    live = SpatialMemory(0.05)
    for f in frames:
        live.integrate(f)
    assert answerer.memory_for(q, live) is live  # the agent's own memory of the episode so far
