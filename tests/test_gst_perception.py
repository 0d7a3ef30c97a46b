"""GST under perception profiles, on real apartments: the agent's media are noisy, the scorer's are not;
the memory agent never relies on ids that survive across frames; the export leaks nothing a shortcut
can use (hashes, pixels, file names, order)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import imageio.v2 as imageio
import numpy as np
import pytest

from spatial_memory.frame import CameraFrame
from spatial_memory.perception import PROFILES
from vla.gst.answering import AnswererConfig, MemoryAnswerer
from vla.gst.cli import main as gst_main
from vla.gst.question import load_questions
from vla.gst.score import score_predictions
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


# ------------------------------------------------------------------------------------------ export
@pytest.fixture(scope="module")
def exported(qdir, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("export") / "set"
    assert gst_main(["export", f"questions={qdir}", f"out={out}", "perception=realistic", "progress=false"]) == 0
    return out


def _hash_choice(rows, root: Path, pixels: bool) -> dict[str, str]:
    """The shortcut an outside model could take: a TDS question's right option is the very image some
    other question of the same scene (same video file) shows as its map. Answers by file hash or pixels."""

    def key(rel: str) -> str:
        png = str(rel).endswith(".png")
        data = imageio.imread(root / rel).tobytes() if pixels and png else (root / rel).read_bytes()
        return hashlib.sha256(data).hexdigest()

    maps_by_video: dict[str, set[str]] = {}
    for r in rows:
        if "map" in r["media"]:
            maps_by_video.setdefault(key(r["media"]["video"]), set()).add(key(r["media"]["map"]))
    out = {}
    for r in rows:
        if r["subtask"] != "TDS-E":
            continue
        maps = maps_by_video.get(key(r["media"]["video"]), set())
        hits = [k for k, o in enumerate(r["media"]["options"]) if key(o) in maps]
        out[r["id"]] = "ABCD"[hits[0]] if hits else "A"
    return out


def test_hash_and_pixel_shortcuts_work_on_the_raw_set_but_not_on_the_export(qdir, exported):  # noqa: F811
    raw = [json.loads(line) for line in (qdir / "questions.jsonl").read_text().splitlines()]
    for pixels in (False, True):
        preds = _hash_choice(raw, qdir, pixels)
        truth = {r["id"]: r["answer"]["value"] for r in raw if r["subtask"] == "TDS-E"}
        assert preds and all(preds[i] == truth[i] for i in preds)  # the shortcut is real: 100 % on the raw set
    rows = [json.loads(line) for line in (exported / "questions.jsonl").read_text().splitlines()]
    private = [json.loads(line) for line in exported.with_name("set.answers.jsonl").read_text().splitlines()]
    for pixels in (False, True):
        preds = _hash_choice(rows, exported, pixels)
        scores, _ = score_predictions([p for p in private if p["id"] in preds], preds, bootstrap=20)
        # with no match, the shortcut falls back to "A": chance (balanced letters), never the answer key
        assert scores["per_subtask"]["TDS-E"] <= 50.0
    # no two exported images are the same file or the same pixels
    pngs = sorted((exported / "media").glob("*.png"))
    assert len({hashlib.sha256(p.read_bytes()).hexdigest() for p in pngs}) == len(pngs)
    assert len({hashlib.sha256(imageio.imread(p).tobytes()).hexdigest() for p in pngs}) == len(pngs)


def test_export_names_no_scene_pose_or_answer_and_scores_against_the_private_file(qdir, exported, tmp_path):  # noqa: F811
    raw = load_questions(qdir)
    rows = [json.loads(line) for line in (exported / "questions.jsonl").read_text().splitlines()]
    assert len(rows) == len(raw)
    text = (exported / "questions.jsonl").read_text()
    scenes = {q.scene for q in raw}
    for needle in [*scenes, *(s.replace("/", "-") for s in scenes), "T_world_cam", '"answer"', '"target']:
        assert needle not in text
    for r in rows:
        assert set(r) == {"id", "subtask", "prompt", "media", "meta"}
        assert set(r["meta"]) <= {"category", "level", "num_options"}
    names = [p.name for p in (exported / "media").iterdir()]
    assert all(len(n.split(".")[0]) == 16 for n in names)  # random names, nothing else in them
    assert not list(exported.glob("*answers*"))  # the private file lives outside the export
    # order: not the generator's (scene by scene)
    order = [json.loads(line)["source"] for line in exported.with_name("set.answers.jsonl").read_text().splitlines()]
    assert order != [q.id for q in raw]
    # a current view never carries a pose; streams carry per-frame labels (frame-local ids)
    r = next(r for r in rows if "current_sensors" in r["media"])
    with np.load(exported / r["media"]["current_sensors"]) as z:
        assert "T_world_cam" not in z.files
    # scoring against the private file: the true answers score 100, a constant answer near chance
    private = exported.with_name("set.answers.jsonl")
    truth = {p["id"]: p for p in map(json.loads, private.read_text().splitlines())}
    from vla.gst.answers import format_answer

    perfect = tmp_path / "perfect.jsonl"
    perfect.write_text(
        "".join(
            json.dumps({"id": i, "prediction": format_answer(_kind(p["subtask"]), _value(p))}) + "\n"
            for i, p in truth.items()
        )
    )
    out = tmp_path / "scored"
    assert gst_main(["score", f"answers={private}", f"predictions={perfect}", f"out={out}", "progress=false"]) == 0
    assert json.loads((out / "scores.json").read_text())["overall"] == pytest.approx(100.0)


def _kind(code: str) -> str:
    from vla.gst.subtasks import SUBTASKS

    return SUBTASKS[code].answer_type


def _value(p):
    v = p["answer"]["value"]
    return tuple(v) if _kind(p["subtask"]) == "point" else v
