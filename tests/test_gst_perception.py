"""GST under perception profiles, on real apartments: the agent's media are noisy, the scorer's are not;
the memory agent never relies on ids that survive across frames (the export: tests/test_gst_export.py)."""

from __future__ import annotations


import numpy as np
import pytest

from spatial_memory.frame import CameraFrame
from spatial_memory.profiles import PROFILES
from vla.questions.answering import AnswererConfig, MemoryAnswerer
from vla.questions.question import load_questions
from vla.gst.sensors import AgentSensors, sensors_for

from .test_gst_generate import qdir  # noqa: F401  (the generated question set fixture)


def test_agent_media_are_noisy_and_the_scorer_keeps_the_truth(qdir):  # noqa: F811
    qs = load_questions(qdir)
    q = next(q for q in qs if q.subtask == "EDs")
    sensors = sensors_for(PROFILES["realistic"], "house")
    qa = q.for_agent(sensors)
    raw, noisy = q.get("stream"), qa.get("stream")
    assert len(raw) == len(noisy)
    assert qa.answer is None and "T_world_cam" not in qa.meta and q.answer is not None
    assert not np.allclose(raw[-1].T_world_cam, noisy[-1].T_world_cam)  # odometry drifted
    assert not np.array_equal(raw[3].depth, noisy[3].depth)
    view = qa.get("current_sensors")
    assert not np.array_equal(view.depth, q.get("current_sensors").depth)
    assert (
        set(view.labels).isdisjoint(q.get("current_sensors").labels) or view.labels != q.get("current_sensors").labels
    )
    # the question's own media and answer are untouched (what the scorer uses)
    assert np.allclose(q.get("stream")[-1].T_world_cam, raw[-1].T_world_cam)
    # one recording per scene: every question of the scene sees the same noisy stream
    other = next(o for o in qs if o.scene == q.scene and o.subtask == "GPs")
    assert other.for_agent(sensors).get("stream") is noisy


class Relabel:
    """Realistic sensors, then every frame's ids replaced by other random numbers (a bijection per frame):
    whatever an agent does with ids, it may not depend on their values across frames."""

    def __init__(self, inner: AgentSensors, seed: int) -> None:
        self.inner, self.rng = inner, np.random.default_rng(seed)
        self._cache: dict = {}

    def __call__(self, question, name, obj):
        out = self.inner(question, name, obj)
        key = (question.scene, name, str(question.media[name]))
        if key not in self._cache:
            frames = [out] if isinstance(out, CameraFrame) else out
            new = [self._relabel(f) for f in frames]
            self._cache[key] = new[0] if isinstance(out, CameraFrame) else new
        return self._cache[key]

    def _relabel(self, f: CameraFrame) -> CameraFrame:
        ids = sorted(f.labels)
        new = self.rng.choice(np.arange(1, 30000), size=len(ids), replace=False)
        lut = np.zeros(int(f.instance.max()) + 1, dtype=np.int32)
        for a, b in zip(ids, new):
            lut[a] = b
        labels = {int(b): f.labels[a] for a, b in zip(ids, new)}
        return CameraFrame(f.rgb, f.depth, f.K, f.T_world_cam, lut[f.instance], labels, f.step)


@pytest.mark.slow  # ~45 s
def test_memory_answers_do_not_depend_on_ids_across_frames(qdir):  # noqa: F811
    qs = [q for q in load_questions(qdir) if q.scene.endswith("900001")]
    assert {q.subtask for q in qs} >= {"EDv", "EDs", "GPv", "GPs", "Pos", "Traj"}
    base = sensors_for(PROFILES["realistic"], "house")
    answers = []
    for seed in (1, 2):
        agent = MemoryAnswerer(AnswererConfig(perception="realistic"))
        sensors = Relabel(base, seed)
        answers.append([agent.answer(q.for_agent(sensors)) for q in qs])
    assert answers[0] == answers[1]
    # ... and the relabelling did change the ids the agent saw
    s1, s2 = Relabel(base, 1), Relabel(base, 2)
    f1, f2 = s1(qs[0], "stream", qs[0].get("stream")), s2(qs[0], "stream", qs[0].get("stream"))
    assert f1[5].labels != f2[5].labels and sorted(f1[5].labels.values()) == sorted(f2[5].labels.values())
