"""GST question generation on real apartments: the constraints of DESIGN §5, answers, resume, scoring."""

import json
import shutil
from collections import Counter

import imageio.v2 as imageio
import numpy as np
import pytest
from scipy.spatial import cKDTree

from envs.registry import make_env
from spatial_memory.geometry import backproject, transform_points
from vla.gst.answers import format_answer
from vla.gst.cli import main as gst_main
from vla.gst.generate import Balancer
from vla.gst.question import load_questions
from vla.gst.subtasks import CHOICES, SUBTASKS

SCENES = 4
GEN = [
    "gen.views=2",
    "gen.stride=3",
    "gen.per_scene={EDv: 1, EDs: 1, EDistv: 1, EDists: 1, GPv: 1, GPs: 1, Pos: 1, Ori: 1, "
    "TDS-E: 1, TDS-M: 1, TDS-H: 1, Traj: 1}",
]


@pytest.fixture(scope="module")
def qdir(tmp_path_factory):
    out = tmp_path_factory.mktemp("gst") / "q"
    assert gst_main(["generate", "split=test", f"scenes={SCENES}", f"out={out}", "progress=false", *GEN]) == 0
    return out


@pytest.fixture(scope="module")
def scenes(qdir):
    """Independent ground truth: each scene rebuilt, its exploration route replanned (deterministic)."""
    out = {}
    for tid in range(SCENES):
        env = make_env({"name": "house", "split": "test", "num_scenes": SCENES}, tid)
        env.reset(options={"trial": 0})
        truth = env.scene_truth()
        out[f"house/test/{900000 + tid}"] = {
            "truth": truth,
            "route": env.exploration_route().poses,
            "frame": env.topdown_frame(),
        }
        env.close()
    return out


def test_every_subtask_is_generated_with_the_paper_formats(qdir):
    qs = load_questions(qdir)
    counts = Counter(q.subtask for q in qs)
    assert set(counts) == set(SUBTASKS)
    manifest = json.loads((qdir / "manifest.json").read_text())
    assert manifest["scenes"] == SCENES and manifest["questions"] == len(qs)
    assert "target: category not unique (semantic)" in manifest["filtered"]  # duplicates exist and are filtered
    assert len({q.id for q in qs}) == len(qs)
    for q in qs:
        assert q.answer["type"] == SUBTASKS[q.subtask].answer_type
        for name, value in q.media.items():
            for v in value if isinstance(value, list) else [value]:
                assert (qdir / v).exists(), (q.id, name)


def test_targets_are_invisible_in_the_current_view_and_were_seen(qdir, scenes):
    for q in load_questions(qdir):
        if q.subtask not in ("EDv", "EDs", "EDistv", "EDists"):
            continue
        view = q.get("current_sensors")
        target = q.meta["target_instance"]
        assert not np.any(view.instance == target), q.id
        assert any(np.any(f.instance == target) for f in q.get("stream")), q.id
        truth = scenes[q.scene]["truth"]
        obj = truth.object(q.meta["target"])
        if SUBTASKS[q.subtask].target == "semantic":
            assert len(truth.by_category(obj.category)) == 1 and q.meta["category"] == obj.category
            assert obj.category.replace("_", " ") in q.prompt
        else:
            boxes = q.get("boxes")
            assert boxes and "red box" in q.prompt


def test_current_views_are_off_the_trajectory_but_overlap_the_video(qdir, scenes):
    checked = 0
    for q in load_questions(qdir):
        if q.subtask not in ("EDs", "Pos"):
            continue
        T = np.asarray(q.meta["T_world_cam"])
        route = scenes[q.scene]["route"]
        assert np.min(np.hypot(*(route[:, :2] - T[:2, 3]).T)) >= 0.5
        # overlap, computed independently: nearest stream point within 15 cm for most view points
        truth = scenes[q.scene]["truth"]
        stream = q.get("stream")
        pts = np.concatenate(
            [
                transform_points(
                    truth.T_world_odom @ f.T_world_cam, backproject(f.depth[::8, ::8], _sub(f.K, 8)).reshape(-1, 3)
                )
                for f in stream
            ]
        )
        pts = pts[np.isfinite(pts).all(axis=1)]
        view = q.get("current_sensors")
        vp = transform_points(T, backproject(view.depth[::4, ::4], _sub(view.K, 4)).reshape(-1, 3))
        vp = vp[np.isfinite(vp).all(axis=1)]
        d, _ = cKDTree(pts).query(vp)
        assert np.mean(d < 0.15) >= 0.4, q.id
        # recognisable: not a bare wall up close, and at least one labelled object in view
        depth = view.depth[np.isfinite(view.depth)]
        assert np.median(depth) >= 1.5, q.id
        assert any(int(i) in view.labels for i in np.unique(view.instance) if i > 0), q.id
        checked += 1
    assert checked >= SCENES


def _sub(K, s):
    K = K.copy()
    K[:2] /= s
    return K


def test_answers_match_independent_geometry(qdir, scenes):
    for q in load_questions(qdir):
        truth = scenes[q.scene]["truth"]
        frame = scenes[q.scene]["frame"]
        if q.subtask in ("EDs", "EDv", "EDists", "EDistv"):
            T = np.asarray(q.meta["T_world_cam"])
            c = truth.object(q.meta["target"]).box.center
            fwd = T[:3, 2]
            bearing = np.degrees(np.arctan2(c[1] - T[1, 3], c[0] - T[0, 3]) - np.arctan2(fwd[1], fwd[0]))
            bearing = (bearing + 180) % 360 - 180
            if q.answer["type"] == "angle":
                assert abs((q.answer["value"] - bearing + 180) % 360 - 180) <= 0.5
            else:
                assert q.answer["value"] == pytest.approx(np.hypot(c[0] - T[0, 3], c[1] - T[1, 3]), abs=0.006)
        elif q.subtask in ("GPs", "GPv"):
            c = truth.object(q.meta["target"]).box.center
            x0, y0, x1, y1 = frame.bounds
            u, v = (c[0] - x0) / (x1 - x0) * 1000, (y1 - c[1]) / (y1 - y0) * 1000
            assert q.answer["value"] == [int(u), int(v)]
        elif q.subtask == "Ori":
            fwd = np.asarray(q.meta["T_world_cam"])[:3, 2]
            heading = np.degrees(np.arctan2(-fwd[0], fwd[1]))  # 0 = image up (world +y), counter-clockwise positive
            assert abs((q.answer["value"] - heading + 180) % 360 - 180) <= 0.5


def test_choice_options_are_right_and_balanced(qdir):
    qs = [q for q in load_questions(qdir) if SUBTASKS[q.subtask].answer_type == "choice"]
    letters = Counter(q.answer["value"] for q in qs)
    assert set(letters) <= set(CHOICES) and max(letters.values()) - min(letters.get(c, 0) for c in CHOICES) <= 3
    for q in qs:
        options = q.get("options")
        assert len(options) == 4
        right = options[CHOICES.index(q.answer["value"])]
        if q.subtask.startswith("TDS"):
            own = np.asarray(imageio.imread(qdir / "maps" / f"{q.scene.replace('/', '-')}_{q.meta['level']}.png"))[
                ..., :3
            ]
            assert np.array_equal(right, own)
            assert sum(np.array_equal(o, own) for o in options) == 1
            assert q.meta["option_scenes"][CHOICES.index(q.answer["value"])] == "self"
        else:  # Traj: four different red paths on one map
            reds = [np.all(np.abs(o.astype(int) - [220, 30, 30]) < 40, axis=-1) for o in options]
            assert all(r.sum() > 50 for r in reds)
            assert len({r.tobytes() for r in reds}) == 4


def test_balancer_is_exact_over_blocks():
    b = Balancer(np.random.default_rng(0))
    draws = Counter(b.next() for _ in range(400))
    assert draws == {c: 100 for c in CHOICES}


def test_resume_regenerates_exactly_the_missing_scene(qdir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(qdir, copy)
    log = (copy / "generation.jsonl").read_text().splitlines(keepends=True)
    last_scene = json.loads(log[-1])["scene"]
    (copy / "generation.jsonl").write_text("".join(log[:-1]))
    lines = (copy / "questions.jsonl").read_text().splitlines(keepends=True)
    kept = [line for line in lines if json.loads(line)["scene"] != last_scene]
    (copy / "questions.jsonl").write_text("".join(kept) + lines[-1][: len(lines[-1]) // 2])  # a torn line too
    assert gst_main(["generate", "split=test", f"scenes={SCENES}", f"out={copy}", "progress=false", *GEN]) == 0
    a = [json.loads(line) for line in (qdir / "questions.jsonl").read_text().splitlines()]
    b = [json.loads(line) for line in (copy / "questions.jsonl").read_text().splitlines()]
    key = lambda r: r["id"]  # noqa: E731
    assert [(r["id"], r["answer"]) for r in sorted(a, key=key)] == [(r["id"], r["answer"]) for r in sorted(b, key=key)]


def test_scoring_perfect_garbage_missing_and_random(qdir, tmp_path):
    qs = load_questions(qdir)
    perfect = tmp_path / "perfect.jsonl"
    perfect.write_text(
        "".join(
            json.dumps({"id": q.id, "prediction": format_answer(q.answer_type, q.answer["value"])}) + "\n" for q in qs
        )
    )
    assert (
        gst_main(["score", f"questions={qdir}", f"predictions={perfect}", f"out={tmp_path / 'p'}", "bootstrap=50"]) == 0
    )
    s = json.loads((tmp_path / "p" / "scores.json").read_text())
    assert s["overall"] == pytest.approx(100) and all(v == pytest.approx(100) for v in s["per_subtask"].values())
    assert (tmp_path / "p" / "scores.png").stat().st_size > 10_000

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text(
        "".join(json.dumps({"id": q.id, "prediction": "I cannot tell"}) + "\n" for q in qs[: len(qs) // 2])
    )
    assert (
        gst_main(["score", f"questions={qdir}", f"predictions={garbage}", f"out={tmp_path / 'g'}", "bootstrap=50"]) == 0
    )
    g = json.loads((tmp_path / "g" / "scores.json").read_text())
    assert g["overall"] == 0 and g["unparsed"] == len(qs) // 2 and g["missing"] == len(qs) - len(qs) // 2

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "nope", "prediction": "1"}) + "\n")
    assert gst_main(["score", f"questions={qdir}", f"predictions={bad}", f"out={tmp_path / 'b'}"]) == 2

    assert (
        gst_main(
            ["eval", "agent=random", f"questions={qdir}", f"out={tmp_path / 'r'}", "progress=false", "bootstrap=50"]
        )
        == 0
    )
    r = json.loads((tmp_path / "r" / "scores.json").read_text())
    assert set(r) >= {"overall", "per_subtask", "count", "ci95"} and 0 < r["overall"] < 60
    preds = [json.loads(line) for line in (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == len(qs) and all(p["prediction"] for p in preds)
