"""GST question generation on real apartments: the constraints of docs/GST.md, answers, resume, scoring."""

import json
import re
import shutil
from collections import Counter

import numpy as np
import pytest
from scipy.spatial import cKDTree

from envs.registry import make_env
from spatial_memory.geometry import backproject, transform_points
from vla.questions.answers import random_answer
from vla.gst.cli import main as gst_main
from vla.gst.generate import Balancer
from vla.questions.question import load_questions
from vla.gst.score import score_one
from vla.questions.subtasks import CHOICES, SUBTASKS

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
            "maps": {level: env.topdown_map(level) for level in ("easy", "medium", "hard")},
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


def map_bounds(truth, margin=0.5, width=640, height=512):
    """World box the 640x512 map shows: the floor plan plus 0.5 m, grown to the image's aspect (ARCHITECTURE §4)."""
    x0, y0, x1, y1 = truth.bounds
    x0, y0, x1, y1 = x0 - margin, y0 - margin, x1 + margin, y1 + margin
    s = max((x1 - x0) / width, (y1 - y0) / height)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return cx - s * width / 2, cy - s * height / 2, cx + s * width / 2, cy + s * height / 2


def grid_point(bounds, xy):
    """World xy -> GST's 0-999 point grid (x right, y down) over the map's world box."""
    x0, y0, x1, y1 = bounds
    g = np.floor([(xy[0] - x0) / (x1 - x0) * 1000, (y1 - xy[1]) / (y1 - y0) * 1000])
    return [int(v) for v in np.clip(g, 0, 999)]


def on_path(option, uv, radius_px=1.5):
    """Fraction of map pixels ``uv`` within ``radius_px`` of the option's drawn path (red, start in blue)."""
    path = np.all(option == (220, 30, 30), axis=-1) | np.all(option == (30, 60, 230), axis=-1)
    rows, cols = np.nonzero(path)
    return float(np.mean([np.min(np.hypot(cols + 0.5 - u, rows + 0.5 - v)) <= radius_px for u, v in uv]))


@pytest.fixture(scope="module")
def expected(qdir, scenes):
    """Every question's answer from the scene truth alone (typed, unrounded), by question id."""
    out = {}
    for q in load_questions(qdir):
        truth = scenes[q.scene]["truth"]
        bounds = map_bounds(truth)
        if "current_sensors" in q.media:
            # the recorded world pose is the view's true pose: its labelled pixels land in their objects' boxes
            T = np.asarray(q.meta["T_world_cam"])
            view = q.get("current_sensors")
            p = transform_points(T, backproject(view.depth, view.K).reshape(-1, 3))
            inst = view.instance.ravel()
            boxes = {o.instance_id: o.box for o in truth.objects}
            ok = [boxes[int(i)].contains(p[inst == i], margin=0.02) for i in np.unique(inst) if i > 0]
            assert np.concatenate(ok).mean() >= 0.99, q.id
            fwd = T[:3, 2]
        if q.subtask in ("EDs", "EDv", "EDists", "EDistv"):
            c = truth.object(q.meta["target"]).box.center
            if q.answer_type == "angle":
                bearing = np.degrees(np.arctan2(c[1] - T[1, 3], c[0] - T[0, 3]) - np.arctan2(fwd[1], fwd[0]))
                out[q.id] = (bearing + 180) % 360 - 180
            else:
                out[q.id] = float(np.hypot(c[0] - T[0, 3], c[1] - T[1, 3]))
        elif q.subtask in ("GPs", "GPv"):
            out[q.id] = grid_point(bounds, truth.object(q.meta["target"]).box.center)
        elif q.subtask == "Pos":
            out[q.id] = grid_point(bounds, T[:2, 3])
        elif q.subtask == "Ori":
            out[q.id] = float(np.degrees(np.arctan2(-fwd[0], fwd[1])))  # 0 = image up (world +y), CCW positive
        elif q.subtask.startswith("TDS"):
            own = scenes[q.scene]["maps"][q.meta["level"]][..., :3]  # rebuilt by the env itself
            same = [i for i, o in enumerate(q.get("options")) if np.array_equal(o, own)]
            assert len(same) == 1, q.id
            out[q.id] = CHOICES[same[0]]
        else:  # Traj: the option whose path runs through every frame of the clip, at its true world position
            x0, y0, x1, y1 = bounds
            s = (x1 - x0) / 640
            xy = np.array([(truth.T_world_odom @ f.T_world_cam)[:2, 3] for f in q.get("clip_stream")])
            uv = np.stack([(xy[:, 0] - x0) / s, (y1 - xy[:, 1]) / s], axis=-1)
            cover = [on_path(o, uv) for o in q.get("options")]
            full = [i for i, c in enumerate(cover) if c == 1.0]
            assert len(full) == 1 and sorted(cover)[-2] <= 0.5, (q.id, cover)
            out[q.id] = CHOICES[full[0]]
    return out


def test_answers_match_independent_geometry(qdir, expected):
    qs = load_questions(qdir)
    assert set(expected) == {q.id for q in qs}
    for q in qs:
        value, want = q.answer["value"], expected[q.id]
        if q.answer_type == "angle":
            assert abs((value - want + 180) % 360 - 180) <= 0.5, q.id
        elif q.answer_type == "distance":
            assert value == pytest.approx(want, abs=0.006), q.id
        elif q.answer_type == "point":
            assert np.abs(np.subtract(value, want)).max() <= 1, (
                q.id,
                value,
                want,
            )  # <= 1: float rounding at a cell edge
        else:
            assert value == want, q.id


def test_choice_options_are_balanced_and_distinct(qdir):
    """The right option is checked in `expected` (TDS: the env's own map; Traj: the clip's true path)."""
    qs = [q for q in load_questions(qdir) if SUBTASKS[q.subtask].answer_type == "choice"]
    letters = Counter(q.answer["value"] for q in qs)
    assert set(letters) <= set(CHOICES) and max(letters.values()) - min(letters.get(c, 0) for c in CHOICES) <= 3
    for q in qs:
        options = q.get("options")
        assert len(options) == 4
        if q.subtask.startswith("TDS"):
            assert len({o.tobytes() for o in options}) == 4
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


def as_text(answer_type, value):
    """A right answer in free text, as a model might write it (not the harness's own formatter)."""
    if answer_type == "angle":
        return f"{value:+.1f} degrees"
    if answer_type == "distance":
        return f"about {value:.2f} m"
    if answer_type == "point":
        return f"<point>{value[0]} {value[1]}</point>"
    return f"The answer is {value}."


CANONICAL = {  # what the random agent writes, read back here with our own patterns
    "angle": (r"-?\d+", lambda m: float(m.group(0))),
    "distance": (r"\d+\.\d", lambda m: float(m.group(0))),
    "point": (r"<point>(\d+) (\d+)</point>", lambda m: (float(m.group(1)), float(m.group(2)))),
    "choice": (r"\(([A-D])\)", lambda m: m.group(1)),
}


def design_score(answer_type, pred, truth):
    """GST-Bench's metrics (docs/GST.md), written out again (in [0, 1])."""
    if answer_type == "angle":
        d = abs(pred - truth) % 360
        e = min(d, 360 - d)
        return np.mean([e < t for t in (15, 30, 45)])
    if answer_type == "distance":
        return np.mean([abs(pred - truth) / truth < 1 - t for t in np.arange(10) * 0.05 + 0.5])
    if answer_type == "point":
        d = np.hypot(pred[0] - truth[0], pred[1] - truth[1])
        return np.mean([d < t for t in (100, 150, 200, 250, 300)])
    return float(pred == truth)


def chance(answer_type, truth):
    """Mean and variance of the score of one uniform random answer (answers.py's answer spaces, written as
    answers.py writes them). Each metric is a mean of indicators of nested events with probabilities p, so
    E[s^2] = mean over pairs of min(p)."""
    if answer_type == "choice":
        p = np.array([0.25])
    elif answer_type == "angle":  # whole degrees, and so is the truth: error < t is error <= t - 1
        p = (2 * np.array([15, 30, 45]) - 1) / 360
    elif answer_type == "distance":  # log-uniform on [0.5, 12] m, written with one decimal
        v = np.arange(1, 121) / 10  # every value it can write, and the log-measure of the draws written as it
        lo, hi = np.log(np.clip(v - 0.05, 0.5, 12)), np.log(np.clip(v + 0.05, 0.5, 12))
        mass = (hi - lo) / np.log(24)
        p = np.array([mass[np.abs(v - truth) < (1 - t) * truth].sum() for t in np.arange(10) * 0.05 + 0.5])
    else:  # uniform on the 1000 x 1000 integer grid: count the grid points strictly within d
        g = np.arange(1000)
        d2 = (g[:, None] - truth[0]) ** 2 + (g[None, :] - truth[1]) ** 2
        p = np.array([np.mean(d2 < d * d) for d in (100, 150, 200, 250, 300)])
    return p.mean(), np.minimum.outer(p, p).mean() - p.mean() ** 2


def test_scoring_perfect_garbage_missing_and_random(qdir, expected, tmp_path):
    qs = load_questions(qdir)
    perfect = tmp_path / "perfect.jsonl"
    perfect.write_text(
        "".join(json.dumps({"id": q.id, "prediction": as_text(q.answer_type, expected[q.id])}) + "\n" for q in qs)
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
    assert set(r) >= {"overall", "per_subtask", "count", "ci95"}
    preds = {
        p["id"]: p["prediction"]
        for p in map(json.loads, (tmp_path / "r" / "predictions.jsonl").read_text().splitlines())
    }
    assert set(preds) == {q.id for q in qs}
    # the harness's scores, recomputed from the predictions with the metrics' formulas
    ours = {}
    for q in qs:
        pattern, read = CANONICAL[q.answer_type]
        m = re.fullmatch(pattern, preds[q.id])
        assert m, (q.id, preds[q.id])
        truth = tuple(q.answer["value"]) if q.answer_type == "point" else q.answer["value"]
        ours.setdefault(q.subtask, []).append(design_score(q.answer_type, read(m), truth))
    assert r["per_subtask"] == pytest.approx({c: 100 * np.mean(v) for c, v in ours.items()})
    assert r["overall"] == pytest.approx(np.mean([100 * np.mean(v) for v in ours.values()]))


def test_uniform_answers_score_chance_on_these_questions(qdir):
    """The random agent's answers, scored by the harness, against the chance level computed for each
    question's own truth (a point near the map's edge has less chance): 400 draws per question."""
    rng = np.random.default_rng(0)
    draws, got, want, var = 400, {}, {}, {}
    for q in load_questions(qdir):
        truth = tuple(q.answer["value"]) if q.answer_type == "point" else q.answer["value"]
        row = {"subtask": q.subtask, "answer": q.answer}
        got.setdefault(q.subtask, []).append(np.mean([score_one(row, random_answer(q, rng))[1] for _ in range(draws)]))
        mu, v = chance(q.answer_type, truth)
        want.setdefault(q.subtask, []).append(mu)
        var.setdefault(q.subtask, []).append(v / draws)
    for c in got:
        sd = np.sqrt(np.sum(var[c])) / len(var[c])
        assert abs(np.mean(got[c]) - np.mean(want[c])) <= 4 * sd, (c, np.mean(got[c]), np.mean(want[c]), sd)


def test_a_scene_without_a_usable_episode_is_skipped_not_fatal(tmp_path):
    """Train apartment 69 has no reachable, visible object of a unique category: its scene is logged as
    skipped and generation goes on (it used to end the whole run with a traceback)."""
    import json

    from vla.gst.cli import main as gst_main

    out = tmp_path / "q"
    args = ["generate", "env=house", "split=train", "first_scene=69", "scenes=1", "env.use_meshes=false"]
    args += ["env.width=64", "env.height=64", f"out={out}", "progress=false"]
    assert gst_main(args) == 0
    (row,) = [json.loads(x) for x in (out / "generation.jsonl").read_text().splitlines()]
    assert row["questions"] == {} and any(k.startswith("scene skipped") for k in row["filtered"])
