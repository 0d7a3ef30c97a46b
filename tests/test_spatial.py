"""Spatial-perception questions (``vla.questions.perception``): every answer checked against geometry computed here,
independently of the generator (depth image, instance masks, the poses the test chose), plus
scoring, resume and bad input."""

import json
import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from vla.data import spatial_generate as G
from vla.questions.perception.questions import UNIFIED_FOVY_DEG, View, colour_name, motion_question, view_questions
from vla.questions.perception.tasks import (
    COLOURS,
    CONTROL_TASKS,
    TASKS,
    baseline_answers,
    blind_answers,
    correct,
    format_answer,
    prompt_key,
    score,
)

ALL = {t: 1 for t in TASKS if t != "camera_motion"}


@pytest.fixture(scope="module")
def house():
    """One small apartment (boxes only, 48 px) and a few rendered views with their questions."""
    from envs.registry import family, make_env

    cfg, tasks = family("house").offline_tasks(
        {"name": "house", "width": 48, "height": 48, "render_map": False, "use_meshes": False}, "train", 0, 1
    )
    env = make_env(cfg, tasks[0][0])
    env.reset(options={"trial": 0})
    truth = env.scene_truth()
    free = np.argwhere(truth.navigable.free)
    rng = np.random.default_rng(3)
    views, items = [], []
    for k in range(40):
        xy = truth.navigable.cell_to_world(free[rng.integers(len(free))])
        f = env.render_pose(np.array([xy[0], xy[1], rng.uniform(-np.pi, np.pi)]))
        v = View(f, env.T_world_odom @ f.T_world_cam)
        qs = view_questions(v, truth, {t: 2 for t in ALL}, rng, min_pixels=8)
        views.append(v)
        items += [(v, q) for q in qs]
        if len({q.task for _, q in items}) == len(ALL) and k >= 8:
            break
    yield env, truth, items
    env.close()


def _of(items, task):
    out = [(v, q) for v, q in items if q.task == task]
    assert out, f"no {task} question in the fixture's views"
    return out


def _mask(view, truth, object_id):
    return view.frame.instance == truth.object(object_id).instance_id


def test_depth_order_matches_the_depth_image_at_the_marked_pixels(house):
    for v, q in _of(house[2], "depth_order"):
        (ax, ay), (bx, by) = q.meta["points"]
        da, db = float(v.frame.depth[ay, ax]), float(v.frame.depth[by, bx])
        assert q.answer == ("A" if da < db else "B") and max(da, db) >= 1.15 * min(da, db)
        assert tuple(q.images[0][ay, ax]) == (255, 0, 0) and tuple(q.images[0][by, bx]) == (0, 0, 255)
        assert f"({ax}, {ay})" in q.prompt and f"({bx}, {by})" in q.prompt


def test_depth_and_distance_agree_with_the_objects_depth_pixels(house):
    _, truth, items = house
    for task in ("depth", "distance"):
        for v, q in _of(items, task):
            o = truth.object(q.meta["object"])
            d = v.frame.depth[_mask(v, truth, o.id)]
            near, far = float(d.min()), float(d.max())
            half = float(np.linalg.norm(o.box.size)) / 2
            if task == "depth":  # the centre's depth lies within the box's reach of the seen surface
                assert near - half - 0.05 <= q.truth <= far + half + 0.05
            else:  # a distance is at least the depth and at most depth grown by the image's half-diagonal angle
                assert q.truth >= near - half
            assert q.answer == f"{q.truth:.1f}" and correct(task, q.answer, q.truth)


def test_size_is_the_largest_extent_of_the_object(house):
    _, truth, items = house
    for v, q in _of(items, "size"):
        o = truth.object(q.meta["object"])
        assert q.truth == round(100 * max(o.box.size)) and q.answer == str(q.truth)


def _corners_from_answer(answer, K, height):
    """The 8 corners (OpenCV camera frame) of a bbox_3d answer, following docs/SPATIAL.md."""
    (box,) = json.loads(answer)
    x, y, zu, sx, sy, sz, roll, pitch, yaw = box["bbox_3d"]
    f_u = (height / 2) / math.tan(math.radians(UNIFIED_FOVY_DEG) / 2)
    z = zu * abs(K[1, 1]) / f_u
    R = Rotation.from_euler("YXZ", [yaw, pitch, roll], degrees=True).as_matrix()
    signs = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)], float)
    corners = (signs * np.array([sx, sy, sz]) / 2) @ R.T + np.array([x, y, z])
    if K[0, 0] < 0:
        corners[:, 0] *= -1
    return corners


def test_bbox_3d_corners_project_around_the_objects_mask(house):
    _, truth, items = house
    for v, q in _of(items, "bbox_3d"):
        K, h = v.frame.K, v.frame.height
        corners = _corners_from_answer(q.answer, K, h)
        front = corners[corners[:, 2] > 0.01]
        u = K[0, 0] * front[:, 0] / front[:, 2] + K[0, 2]
        vv = K[1, 1] * front[:, 1] / front[:, 2] + K[1, 2]
        ys, xs = np.nonzero(_mask(v, truth, q.meta["object"]))
        inside = (xs >= u.min() - 1.5) & (xs <= u.max() + 1.5) & (ys >= vv.min() - 1.5) & (ys <= vv.max() + 1.5)
        assert inside.mean() >= 0.95, (q.answer, inside.mean())
        o = truth.object(q.meta["object"])
        assert sorted(json.loads(q.answer)[0]["bbox_3d"][3:6]) == pytest.approx(sorted(o.box.size), abs=0.006)


def test_direction_follows_the_objects_mask_centroids(house):
    _, truth, items = house
    for v, q in _of(items, "direction"):
        a, b = (np.nonzero(_mask(v, truth, oid))[1].mean() for oid in q.meta["objects"])
        if abs(a - b) > 0.1 * v.frame.width:  # centroids of partly hidden objects may differ from centres
            assert q.answer == ("left" if a < b else "right")


def test_count_is_the_number_of_instances_of_the_category_in_the_image(house):
    _, truth, items = house
    for v, q in _of(items, "count"):
        ids = {int(i) for i in np.unique(v.frame.instance) if i > 0}
        n = sum(1 for o in truth.objects if o.category == q.meta["category"] and o.instance_id in ids)
        assert q.truth == n and q.answer == str(n)
    assert len({q.truth for _, q in _of(items, "count")}) >= 2  # not one answer for every question


def test_presence_says_yes_only_for_a_category_with_pixels_in_view(house):
    _, truth, items = house
    for v, q in _of(items, "presence"):
        ids = {o.instance_id for o in truth.objects if o.category == q.meta["category"]}
        pixels = max([int(np.sum(v.frame.instance == i)) for i in ids if i is not None], default=0)
        assert (q.answer == "yes" and pixels >= 8) or (q.answer == "no" and pixels == 0), (q.meta, pixels)
    assert {q.answer for _, q in _of(items, "presence")} == {"yes", "no"}


def test_colour_names_the_colour_of_the_objects_pixels(house):
    rng = np.random.default_rng(0)
    for name, rgb in (("red", (255, 0, 0)), ("blue", (0, 0, 255)), ("white", (250, 250, 250)), ("black", (5, 5, 5))):
        noisy = np.clip(np.array(rgb) + rng.normal(0, 10, size=(50, 3)), 0, 255).astype(np.uint8)
        assert colour_name(noisy) == name
    _, truth, items = house
    answers = set()
    for v, q in _of(items, "colour"):
        pixels = v.frame.rgb[v.frame.instance == q.meta["instance"]]
        assert len(pixels) >= 8 and q.answer in COLOURS
        answers.add(q.answer)
    assert len(answers) >= 2


def test_the_control_set_asks_about_the_very_same_views(tmp_path):
    """vla-data spatial tasks=[presence,colour] with the spatial set's seed renders the same images: the
    stage-2 control pre-trains on the same pixels, only the questions lose their geometry."""
    common = {"split": "train", "scenes": 1, "resolution": 32, "views": 3, "use_meshes": False, "progress": False}
    G.generate({**common, "out": str(tmp_path / "spatial")})
    G.generate({**common, "out": str(tmp_path / "control"), "tasks": list(CONTROL_TASKS)})
    spatial, control = G.load_records(tmp_path / "spatial" / "train"), G.load_records(tmp_path / "control" / "train")
    assert {r["task"] for r in control} <= set(CONTROL_TASKS) and not {r["task"] for r in spatial} & set(CONTROL_TASKS)

    def pixels(root, rows):
        return {(root / "train" / p).read_bytes() for r in rows for p in r["images"] if r["task"] != "depth_order"}

    plain = pixels(tmp_path / "spatial", [r for r in spatial if r["task"] != "camera_motion"])
    assert pixels(tmp_path / "control", control) <= plain and len(pixels(tmp_path / "control", control)) >= 2


def test_camera_motion_is_the_move_between_the_two_poses(house):
    env = house[0]
    p1 = np.array([*env.scene_truth().navigable.cell_to_world(np.argwhere(env.scene_truth().navigable.free)[0]), 0.4])
    for fwd, left, turn_deg in ((0.8, 0.0, 0.0), (0.3, -0.4, 25.0), (0.0, 0.5, -30.0)):
        yaw = p1[2]
        xy = p1[:2] + fwd * np.array([math.cos(yaw), math.sin(yaw)]) + left * np.array([-math.sin(yaw), math.cos(yaw)])
        f1, f2 = env.render_pose(p1), env.render_pose(np.array([*xy, yaw + math.radians(turn_deg)]))
        q = motion_question(View(f1, env.T_world_odom @ f1.T_world_cam), View(f2, env.T_world_odom @ f2.T_world_cam))
        assert q.truth == [round(fwd, 1), round(left, 1), round(turn_deg)]
        assert q.prompt.count("<image>") == 2 and len(q.images) == 2


def test_every_answer_scores_correct_and_wrong_answers_do_not(house):
    items = [q for _, q in house[2]]
    assert all(correct(q.task, q.answer, q.truth) for q in items)
    wrong = {"depth_order": "A", "direction": "left", "count": "0"}
    for task, value in (("depth", 2.0), ("distance", 2.0)):
        assert correct(task, "2.1", value) and not correct(task, "2.3", value) and not correct(task, "far", value)
    assert correct("size", "110", 100) and not correct("size", "120", 100)
    assert correct("camera_motion", "0.5 0.1 8", [0.5, 0.0, 0.0]) and not correct(
        "camera_motion", "0.5 0 12", [0.5, 0, 0]
    )
    assert not correct("camera_motion", "1.0 0 0", [0.5, 0, 0])
    box = [0.0, 0.0, 4.0, 1.0, 1.0, 1.0, 0, 0, 0]
    assert correct("bbox_3d", format_answer("bbox_3d", [0.3, 0, 4.3, 1.2, 0.8, 1, 0, 0, 0], "x"), box)
    assert not correct("bbox_3d", format_answer("bbox_3d", [0.3, 0, 5.3, 1, 1, 1, 0, 0, 0], "x"), box)
    assert not correct("bbox_3d", "a box", box)
    for task, w in wrong.items():
        assert not correct(task, w, {"depth_order": "B", "direction": "right", "count": 2}[task])


def test_scores_per_task_and_the_train_mean_baseline():
    train = [
        {"id": "a", "task": "depth", "truth": 2.0, "meta": {}},
        {"id": "b", "task": "depth", "truth": 4.0, "meta": {}},
        {"id": "c", "task": "direction", "truth": "left", "meta": {}},
        {"id": "d", "task": "direction", "truth": "left", "meta": {}},
        {"id": "e", "task": "direction", "truth": "right", "meta": {}},
    ]
    base = baseline_answers(train)
    assert base == {"depth": "3.0", "direction": "left"}
    test = [{"id": "x", "task": "depth", "truth": 3.1}, {"id": "y", "task": "direction", "truth": "right"}]
    s = score(test, {r["id"]: base[r["task"]] for r in test})
    assert s["per_task"] == {"depth": 100.0, "direction": 0.0} and s["overall"] == 50.0 and s["missing"] == 0
    assert score(test, {})["missing"] == 2


def test_the_blind_baseline_answers_from_the_question_words_alone(tmp_path):
    """Sizes by category: the words predict them where the task's mean does not; numbers in a prompt
    (marked pixels) do not split the questions; an unseen question falls back to the task's answer."""
    size = "<image> What is the longest side of the {}, in cm?"
    train = [
        {"id": "a", "task": "size", "prompt": size.format("bed"), "truth": 200, "meta": {}},
        {"id": "b", "task": "size", "prompt": size.format("bed"), "truth": 210, "meta": {}},
        {"id": "c", "task": "size", "prompt": size.format("cup"), "truth": 10, "meta": {}},
        {"id": "d", "task": "depth_order", "prompt": "<image> A at (3, 40), B at (7, 8)?", "truth": "A", "meta": {}},
        {"id": "e", "task": "depth_order", "prompt": "<image> A at (12, 4), B at (70, 81)?", "truth": "A", "meta": {}},
    ]
    assert prompt_key(train[3]["prompt"]) == prompt_key(train[4]["prompt"]) != prompt_key(train[0]["prompt"])
    blind = blind_answers(train)
    assert blind[prompt_key(size.format("bed"))] == format_answer("size", 205.0)
    assert blind[prompt_key(size.format("cup"))] == format_answer("size", 10.0)
    assert len(blind) == 3  # bed, cup, and one depth-order question whatever its pixels

    from vla.data.spatial_eval import baseline_predictions

    test = [
        {"id": "x", "task": "size", "prompt": size.format("bed"), "truth": 198},
        {"id": "y", "task": "size", "prompt": size.format("sofa"), "truth": 140},
    ]
    d = tmp_path / "train"  # a train set on disk, as the command reads it
    d.mkdir()
    (d / "records.house.jsonl").write_text("".join(json.dumps({**r, "scene": "s"}) + "\n" for r in train))
    (d / "scenes.house.jsonl").write_text(json.dumps({"scene": "s"}) + "\n")
    words = baseline_predictions(d, test, blind=True)
    task = baseline_predictions(d, test)
    assert words["x"] == format_answer("size", 205.0) and task["x"] == task["y"] == format_answer("size", 140.0)
    assert words["y"] == task["y"]  # the sofa was never asked about in training
    assert score(test, words)["per_task"]["size"] == 100.0 and score(test, task)["per_task"]["size"] == 50.0


def _fake_scene(opts, scene):
    """A stand-in renderer (the resume logic is what is under test): rows that name their scene."""
    k = int(scene["name"].rsplit("/", 1)[-1])
    rows = [
        {
            "id": f"s{k}-{j}",
            "task": "count",
            "scene": scene["name"],
            "prompt": "<image>",
            "images": [f"images/{k}.png"],
            "answer": str(j),
            "truth": j,
            "meta": {},
        }
        for j in range(3)
    ]
    return {"rows": rows, "files": {f"images/{k}.png": b"png"}, "views": 1, "seconds": 0.0}


def test_a_killed_run_resumes_without_repeats(tmp_path, monkeypatch):
    monkeypatch.setattr(G, "encode_scene", _fake_scene)
    cfg = {"split": "val", "scenes": 4, "out": str(tmp_path), "progress": False}
    assert G.generate(cfg)["questions_this_run"] == 12
    full = (tmp_path / "val" / "records.house.jsonl").read_text()
    # a kill while the third scene was being written: its line in scenes.* missing, its records torn
    done = tmp_path / "val" / "scenes.house.jsonl"
    lines = done.read_text().splitlines(keepends=True)
    done.write_text("".join(lines[:2]))
    rec = tmp_path / "val" / "records.house.jsonl"
    rec.write_text("".join(full.splitlines(keepends=True)[:7]) + '{"id": "s800002-1", "ta')
    r = G.generate(cfg)
    assert r["scenes_this_run"] == 2 and r["questions_this_run"] == 6 and r["questions"] == 12
    assert rec.read_text() == full
    assert G.generate(cfg)["scenes_this_run"] == 0
    ids = [row["id"] for row in G.load_records(tmp_path / "val")]
    assert len(ids) == len(set(ids)) == 12
    # shards split the scenes and write beside each other
    for k in range(2):
        G.generate({**cfg, "split": "test", "shards": 2, "shard": k})
    assert len(G.load_records(tmp_path / "test")) == 12
    with pytest.raises(ValueError, match="other options"):
        G.generate({**cfg, "resolution": 64})


def test_an_apartment_without_a_navigation_target_is_skipped_and_the_run_goes_on(tmp_path):
    """Train apartment 69 has no object the navigation task can use, so the env cannot reset into an
    episode (the real env, as ``vla-gst generate`` meets it): it is finished with no questions, its
    neighbour still gets its own, and a rerun does not try it again."""
    cfg = {"split": "train", "first_scene": 68, "scenes": 2, "views": 1, "out": str(tmp_path), "progress": False}
    r = G.generate(cfg)
    assert r["skipped_this_run"] == ["house/train/69"] and r["questions_this_run"] > 0
    done = [json.loads(x) for x in (tmp_path / "train" / "scenes.house.jsonl").read_text().splitlines()]
    assert {d["scene"]: d["questions"] for d in done} == {"house/train/68": r["questions"], "house/train/69": 0}
    assert "no navigation target" in done[1]["skipped"]
    again = G.generate(cfg)
    assert again["scenes_this_run"] == 0 and again["skipped_this_run"] == []


@pytest.mark.parametrize(
    "cfg, message",
    [
        ({"tasks": ["depth", "bogus"]}, "unknown spatial task type"),
        ({"split": "dev"}, "split must be one of"),
        ({"family": "kitchen"}, "family must be one of"),
        ({"split": "val", "first_scene": 995, "scenes": 10}, "has 1000 scenes"),
        ({"shards": 2, "shard": 2}, "shard must be in"),
        ({"colour": "red"}, "unknown spatial option"),
    ],
)
def test_bad_options_are_refused_with_a_clear_error(cfg, message):
    with pytest.raises(ValueError, match=message):
        G.scene_list(G.SpatialOptions.from_dict(cfg))


def test_scenes_come_from_the_familys_capability_never_its_name():
    """Which scenes a family offers is its own (envs.registry.HasSpatialScenes): a family registered from
    outside that has the capability is photographed like the built-in ones, one without it is refused
    with the families that have it; the built-in lists keep their names and disjoint LIBERO trials."""
    from envs import registry

    class Toy:
        name = "toy"

        def tasks(self, cfg):
            return []

        def make(self, cfg, task_id):
            raise AssertionError("not built here")

        def spatial_scenes(self, split, first, n, resolution, options):
            return [{"name": f"toy/{split}/{i}", "env": {"name": "toy"}, "task": i, "trial": 0} for i in range(n)]

    class Bare(Toy):
        spatial_scenes = None

    registry.register("toy", Toy)
    registry.register("bare", type("BareFamily", (), {"name": "bare", "tasks": Toy.tasks, "make": Toy.make}))
    try:
        got = G.scene_list(G.SpatialOptions.from_dict({"family": "toy", "split": "val", "scenes": 2}))
        assert [s["name"] for s in got] == ["toy/val/0", "toy/val/1"]
        with pytest.raises(ValueError, match=r"family must be one of \['house', 'libero', 'toy'\]"):
            G.SpatialOptions.from_dict({"family": "bare"})
    finally:
        registry._FAMILIES.pop("toy", None)
        registry._FAMILIES.pop("bare", None)
    house = G.scene_list(G.SpatialOptions.from_dict({"family": "house", "split": "val", "scenes": 2}))
    assert [s["name"] for s in house] == ["house/val/800000", "house/val/800001"]
    libero = {"family": "libero", "suite": "libero_object", "libero_tasks": [1, 3], "scenes": 3}
    val = G.scene_list(G.SpatialOptions.from_dict({**libero, "split": "val"}))
    assert [(s["task"], s["trial"]) for s in val] == [(1, 6000), (3, 6000), (1, 6001)]
    assert G.scene_list(G.SpatialOptions.from_dict({**libero, "split": "test"}))[0]["trial"] == 8000


def test_the_command_line_reports_bad_input(tmp_path, capsys):
    from vla.data.cli import main

    assert main(["spatial", "tasks=[depth,bogus]", f"out={tmp_path}", "progress=false"]) == 2
    assert "unknown spatial task type(s) ['bogus']" in capsys.readouterr().err


def test_bad_sets_and_scores_are_refused(tmp_path, capsys):
    from vla.data.cli import main
    from vla.data.spatial_qa import SpatialQASource

    with pytest.raises(FileNotFoundError, match="no spatial question directory"):
        SpatialQASource(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no finished spatial questions"):
        SpatialQASource(tmp_path / "empty")
    assert main(["spatial-score", f"data={tmp_path}/empty"]) == 2
    assert "predictions=FILE or baseline" in capsys.readouterr().err


def _png_scene(opts, scene):
    """A stand-in renderer writing real PNGs (the data source is what is under test)."""
    import io

    import imageio.v3 as iio

    k = int(scene["name"].rsplit("/", 1)[-1])
    buf = io.BytesIO()
    iio.imwrite(buf, np.full((8, 8, 3), k % 251, np.uint8), extension=".png")
    one = {"task": "count", "scene": scene["name"], "prompt": "<image>\nHow many?", "images": [f"images/{k}.png"]}
    two = {"task": "camera_motion", "scene": scene["name"], "prompt": "<image> <image>\nMoved?"}
    rows = [
        {**one, "id": f"s{k}-0", "answer": "2", "truth": 2, "meta": {}},
        {**two, "id": f"s{k}-1", "images": [f"images/{k}.png"] * 2, "answer": "0.5 0.0 10", "truth": [0.5, 0, 10]},
    ]
    return {"rows": rows, "files": {f"images/{k}.png": buf.getvalue()}, "views": 1, "seconds": 0.0}


def test_spatial_sets_are_visual_qa_samples_split_by_scene(tmp_path, monkeypatch):
    from vla.data import split_by_episode
    from vla.data.spatial_qa import SpatialQASource

    monkeypatch.setattr(G, "encode_scene", _png_scene)
    G.generate({"split": "train", "scenes": 6, "out": str(tmp_path), "progress": False})
    src = SpatialQASource(tmp_path / "train")
    assert len(src) == 12 and len(src.episodes()) == 6
    s = src.sample(5)
    assert s.kind == "qa" and s.answer == "0.5 0.0 10" and len(s.images) == 2 and s.images[0].shape == (8, 8, 3)
    assert s.episode == "house/train/2" and int(s.images[0][0, 0, 0]) == 2
    train, val = split_by_episode(src, 0.3, seed=0)
    assert set(train.episodes()).isdisjoint(val.episodes()) and len(train) + len(val) == 12
    assert len(SpatialQASource(tmp_path / "train", tasks=["count"])) == 6
    with pytest.raises(ValueError, match="unknown spatial task type"):
        SpatialQASource(tmp_path / "train", tasks=["texture"])


@pytest.mark.slow
def test_generate_train_evaluate_and_baseline_end_to_end(tmp_path):
    """vla-data spatial (a real apartment) -> vla-train data=spatial (a few steps) -> spatial-eval -> baseline."""
    import subprocess

    from tests.conftest import VENV_BIN, cli_env

    def run(*args):
        r = subprocess.run([str(VENV_BIN / args[0]), *args[1:]], capture_output=True, text=True, env=cli_env())
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout

    common = [
        "family=house",
        "resolution=48",
        "views=2",
        "use_meshes=false",
        f"out={tmp_path / 'set'}",
        "progress=false",
    ]
    run("vla-data", "spatial", "split=train", "scenes=1", *common)
    run("vla-data", "spatial", "split=test", "scenes=1", *common)
    out = run(
        "vla-train",
        "model=tiny_qwen2_5_vl",
        "model.image_size=56",
        "policy=house",
        "policy.inputs.cameras=[]",
        "data=spatial",
        f"data.paths=[{tmp_path / 'set' / 'train'}]",
        "data.val_fraction=0",
        "train.steps=2",
        "train.batch_size=2",
        "train.loader_workers=0",
        "train.val_every=0",
        "train.plot=false",
        f"out={tmp_path / 'run'}",
        "progress=false",
    )
    assert "2 steps" in out
    ev = run(
        "vla-data",
        "spatial-eval",
        f"checkpoint={tmp_path / 'run' / 'policy'}",
        f"data={tmp_path / 'set' / 'test'}",
        f"out={tmp_path / 'eval'}",
        "limit=3",
        "max_new_tokens=8",
        "progress=false",
    )
    scores = json.loads((tmp_path / "eval" / "scores.json").read_text())
    assert scores["questions"] == 3 and scores["missing"] == 0 and "overall" in ev
    assert len((tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()) == 3
    base = run(
        "vla-data", "spatial-score", f"data={tmp_path / 'set' / 'test'}", f"baseline={tmp_path / 'set' / 'train'}"
    )
    assert "spatial: overall" in base


@pytest.mark.slow
def test_libero_boxes_directions_and_depth_order_in_the_mirrored_agentview():
    """LIBERO's protocol flip mirrors the agentview image (fx < 0): the same independent checks."""
    from envs.registry import make_env

    cfg = {"name": "libero", "suite": "libero_goal", "init_states": "sampled", "resolution": 96}
    env = make_env({**cfg, "cameras": ["agentview"], "depth": True, "segmentation": True}, 0)
    try:
        items = []
        for trial in (6000, 6001):
            obs, _ = env.reset(options={"trial": trial})
            f = obs.cameras["agentview"]
            assert f.K[0, 0] < 0
            v = View(f, f.T_world_cam)
            items += [
                (v, q)
                for q in view_questions(v, env.scene_truth(), {t: 2 for t in ALL}, np.random.default_rng(trial), 20)
            ]
        truth = env.scene_truth()
    finally:
        env.close()
    house = (None, truth, items)
    test_depth_order_matches_the_depth_image_at_the_marked_pixels(house)
    test_bbox_3d_corners_project_around_the_objects_mask(house)
    test_direction_follows_the_objects_mask_centroids(house)
