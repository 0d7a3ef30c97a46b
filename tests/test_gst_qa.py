"""GST question sets as training samples (``GSTQASource``) and the fused memory of their sensor streams
(``vla.policy.question_map``): what a model is shown, the answer it is taught, and each stream fused
once -- in memory, on disk, never stale."""

import json
import os
import shutil

import numpy as np
import pytest

from envs.observation import Observation
from vla.data import GSTQASource
from vla.policy.question_map import StreamMemoryCache, question_entries, stream_memory_entries
from vla.questions.question import load_questions, load_stream, save_stream
from vla.questions.subtasks import SUBTASKS
from vla.transforms.map_inputs import MemoryInputs, MemoryInputsConfig


def expected_answer(q) -> str:
    kind, v = q.answer["type"], q.answer["value"]
    return {
        "angle": lambda: str(int(round(v))),
        "distance": lambda: "%.1f" % v,
        "point": lambda: f"<point>{int(round(v[0]))} {int(round(v[1]))}</point>",
        "choice": lambda: f"({v})",
    }[kind]()


def test_gst_questions_as_visual_qa(gst):
    qs = {q.id: q for q in load_questions(gst)}
    src = GSTQASource(gst, max_video_frames=6)
    assert src.episodes() == sorted({q.scene for q in qs.values()}) and src.actions() is None
    subtasks = set()
    for i in range(len(src)):
        s, q = src.sample(i), src.question(i)
        subtasks.add(q.subtask)
        assert s.kind == "qa" and s.episode == q.scene and s.answer == expected_answer(qs[q.id])
        assert s.prompt.endswith(q.prompt) and s.prompt.count("<image>") == len(s.images)
        video = q.get("clip_video" if "clip_video" in q.media else "video")
        n_extra = sum(k in q.media for k in ("current_view", "map")) + len(q.media.get("options", []))
        assert len(s.images) == min(6, len(video)) + n_extra
        assert all(im.dtype == np.uint8 and im.ndim == 3 and im.shape[2] == 3 for im in s.images)
        shown = s.images[: len(s.images) - n_extra]
        assert all(any(np.array_equal(im, f) for f in video) for im in shown)  # frames of the video, in order
        if "current_view" in q.media:
            np.testing.assert_array_equal(s.images[len(shown)], q.get("current_view"))
        if "options" in q.media:
            for im, opt in zip(s.images[-4:], q.get("options")):
                np.testing.assert_array_equal(im, opt)
            assert "A <image> B <image> C <image> D <image>" in s.prompt
        if q.subtask in ("EDv", "GPv"):  # the target's red box is in at least one frame shown
            boxed = {int(j) for j in q.get("boxes")}
            assert any(np.array_equal(im, video[j]) for im in shown for j in boxed)
    assert {"EDv", "EDs", "GPv", "Pos", "TDS-E"} <= subtasks


def test_gst_questions_with_memory_inputs(gst):
    config = MemoryInputsConfig(map_size=(96, 96))
    src = GSTQASource(gst, memory=config)
    i = next(i for i in range(len(src)) if src.question(i).subtask == "EDs")
    s, q = src.sample(i), src.question(i)
    inputs = MemoryInputs(config)
    inputs.reset(None)  # a mobile base: the apartment-scale memory
    for f in q.get("stream"):
        inputs.integrate(Observation(cameras={"ego": f}, state=np.zeros(0), instruction="", step=f.step))
    want = question_entries(q, inputs)
    assert len(s.images) == 2 and s.prompt.count("<image>") == 2  # memory map + current view; no video frames
    np.testing.assert_array_equal(s.images[0], want["topdown"])
    np.testing.assert_array_equal(s.images[1], q.get("current_view"))
    assert want["text"] in s.prompt and s.answer == expected_answer(q)
    assert "from the current view" in s.prompt


def test_a_questions_object_table_is_measured_from_its_current_view_and_led_by_its_target(gst):
    """What the memory agent computes its answers from is in the words a model reads: for every
    egocentric question the [target] row's direction and distance are the answer (gt perception)."""
    config = MemoryInputsConfig(map_size=(64, 64), inputs=("objects", "text"))
    qs = [q for q in load_questions(gst) if q.subtask in ("EDv", "EDs")]
    assert qs
    for q in qs:
        inputs = MemoryInputs(config)
        inputs.reset(None)
        for f in q.get("stream"):
            inputs.integrate(Observation(cameras={"ego": f}, state=np.zeros(0), instruction="", step=f.step))
        plain = inputs.entries()
        e = question_entries(q, inputs)
        assert e["text"].startswith("[target] ") and e["text"].count("[target]") == 1
        assert bool(e["objects/target"][0]) and not e["objects/target"][1:].any()
        truth = q.answer["value"]
        d = float(e["objects/direction_deg"][0])
        assert abs((d - truth + 180) % 360 - 180) <= 5, (q.id, d, truth)
        side = "ahead" if abs(d) < 0.5 else f"{abs(d):.0f} deg {'left' if d > 0 else 'right'}"
        assert side in e["text"].split(";")[0]
        assert not np.allclose(plain["objects/direction_deg"][:1], e["objects/direction_deg"][:1])  # another pose


def test_bad_question_sets(tmp_path, gst):
    bad = tmp_path / "q"
    shutil.copytree(gst, bad)
    lines = (bad / "questions.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["answer"] = None
    (bad / "questions.jsonl").write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    with pytest.raises(ValueError, match=f"question {first['id']}: no answer"):
        GSTQASource(bad)
    (bad / "questions.jsonl").write_text("\n".join(lines) + "\n")
    os.remove(bad / json.loads(lines[0])["media"]["current_view"])
    with pytest.raises(ValueError, match=f"question {first['id']}: media 'current_view' file .* does not exist"):
        GSTQASource(bad)
    with pytest.raises(ValueError, match="does not exist"):
        GSTQASource(tmp_path / "nothing")


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert a[k].dtype == b[k].dtype
            np.testing.assert_array_equal(a[k], b[k])
        else:
            assert type(a[k]) is type(b[k]) and a[k] == b[k], k


def test_stream_memory_is_fused_once_and_kept_on_disk(gst, tmp_path):
    config = MemoryInputsConfig(map_size=(64, 64))
    qs = load_questions(gst)
    q = next(q for q in qs if q.subtask == "EDs")
    want = stream_memory_entries(q, config)
    cache = StreamMemoryCache(config, tmp_path / "cache")
    _same(cache.entries(q), want)
    assert cache.fused == 1 and len(list((tmp_path / "cache").glob("*.hdf5"))) == 1
    # the scene's other questions share the stream: served from memory
    for other in (o for o in qs if o.scene == q.scene and "clip_stream" not in o.media):
        _same(cache.entries(other), want)
    assert cache.fused == 1
    # a new process (a data-loader worker, the next run) reads the file, bit for bit
    again = StreamMemoryCache(config, tmp_path / "cache")
    _same(again.entries(q), want)
    assert again.fused == 0
    # another config is another file
    other = StreamMemoryCache(MemoryInputsConfig(map_size=(48, 48)), tmp_path / "cache")
    assert other.entries(q)["topdown"].shape[:2] == (48, 48) and other.fused == 1
    # a file of another identity under this one's name (copied from another cache) is fused again, never read
    path = cache.path(cache.key(q))
    shutil.copyfile(other.path(other.key(q)), path)
    fresh = StreamMemoryCache(config, tmp_path / "cache")
    _same(fresh.entries(q), want)
    assert fresh.fused == 1
    # a damaged file is fused again
    path.write_bytes(b"not an entries file")
    fresh = StreamMemoryCache(config, tmp_path / "cache")
    _same(fresh.entries(q), want)
    assert fresh.fused == 1


def test_a_changed_stream_is_never_served_stale(gst, tmp_path):
    d = tmp_path / "q"
    shutil.copytree(gst, d)
    config = MemoryInputsConfig(map_size=(64, 64))
    q = next(q for q in load_questions(d) if q.subtask == "EDs")
    cache = StreamMemoryCache(config, tmp_path / "cache")
    key = cache.key(q)
    cache.entries(q)
    stream = d / q.media["stream"]
    st = os.stat(stream)
    os.utime(stream, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert cache.key(q) == key  # touched, not changed: the key names the content
    save_stream(stream, load_stream(stream)[:-1])  # one frame less
    assert cache.key(q) != key
    os.remove(stream)
    with pytest.raises(ValueError, match="stream file"):
        cache.key(q)


def test_gst_training_shares_the_stream_cache(gst, tmp_path):
    config = MemoryInputsConfig(map_size=(64, 64))
    src = GSTQASource(gst, memory=config, cache_dir=tmp_path / "cache")
    samples = [src.sample(i) for i in range(len(src))]
    media = [src.question(i).media for i in range(len(src))]
    streams = {json.dumps(m.get("clip_stream", m["stream"])) for m in media}
    assert src._cache.fused == len(streams)  # each stream fused once ...
    assert len(list((tmp_path / "cache").glob("*.hdf5"))) == len(samples)  # ... each question's view kept
    again = GSTQASource(gst, memory=config, cache_dir=tmp_path / "cache")
    for i, s in enumerate(samples):
        t = again.sample(i)
        assert t.prompt == s.prompt and len(t.images) == len(s.images)
        for a, b in zip(t.images, s.images):
            np.testing.assert_array_equal(a, b)
    assert again._cache.fused == 0


def test_some_subtasks_kept_and_weighted_up_in_a_mixture(gst, tmp_path):
    from vla.train.config import DataConfig
    from vla.train.data import build_sources

    every = load_questions(gst)
    ego = GSTQASource(gst, subtasks=["EDv", "EDs"])
    kept = [q.id for q in every if q.subtask in ("EDv", "EDs")]
    assert 0 < len(ego) == len(kept) < len(every)
    assert [ego.question(i).id for i in range(len(ego))] == kept
    with pytest.raises(ValueError, match="subset of"):
        GSTQASource(gst, subtasks=["EDv", "Nope"])
    missing = next(s for s in SUBTASKS if s not in {q.subtask for q in every})
    with pytest.raises(ValueError, match="holds no questions of subtasks"):
        GSTQASource(gst, subtasks=[missing])
    part = {"kind": "gst_qa", "paths": [str(gst)], "val_fraction": 0}
    cfg = DataConfig.from_dict(
        {"kind": "mixture", "parts": [{**part, "tasks": ["EDv", "EDs"], "weight": 3.0}, {**part, "weight": 1.0}]}
    )
    train, _, weights, _ = build_sources(cfg, 1, None, tmp_path / "cache", 0)
    assert [len(s) for s in train] == [len(kept), len(every)] and weights == [3.0, 1.0]


def test_the_copy_probe_reads_the_answer_off_the_memory_table(gst, tmp_path):
    """analyses/probe_gst_copy.py: the egocentric questions' object table holds their answer in its
    ``[target]`` row (gt perception: the rule scores 100, as the memory agent does), and two steps of the
    text-only probe run and score every val question as the benchmark does."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))
    from probe_gst_copy import EGO, main

    root = tmp_path / "proof"
    (root / "questions").mkdir(parents=True)
    for split in ("train", "val"):
        (root / "questions" / split).symlink_to(gst)
    assert main(["--root", str(root), "--steps", "2", "--batch", "2", "--eval-every", "2"]) == 0
    out = json.loads((root / "probe_copy.json").read_text())
    ego = [q for q in load_questions(gst) if q.subtask in EGO]
    assert out["train"] == out["val"] == len(ego) > 0
    assert set(out["table_rule"]) == {q.subtask for q in ego} and set(out["table_rule"].values()) == {100.0}
    scores = out["val_scores"]["2"]
    assert set(scores) == set(out["table_rule"]) and all(0 <= v <= 100 for v in scores.values())
    assert [c["step"] for c in out["curve"]] == [2]
