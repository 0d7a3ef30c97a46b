"""``vla-gst export``: what an outside model gets leaks no answer to a matcher.

Fast tier, on the session's tiny set (``gst``: one apartment, 64 px, exported with
``export_tds=mixed``): every medium is a disguised copy of its own, nothing names a scene, a pose or
an answer, clips are recordings of their own, answers on a map move with its crop, in-process agents
get the same blind view. Slow tier, on six test apartments (two TDS questions per level and two Traj
per apartment, ``export_tds=apart``): a nearest-neighbour attacker (``vla/gst/attack.py``) solves
the raw set and is at chance on the export; hash and pixel shortcuts likewise; letters are balanced
over the whole set; an apartment keeps its TDS questions or its map questions, never both."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import imageio.v2 as imageio
import numpy as np
import pytest
from scipy.stats import binom

from vla.gst.cli import main as gst_main
from vla.questions.question import PUBLIC_META, load_questions
from vla.gst.score import score_predictions

SCENES = 6
PER_SCENE = (
    "{EDv: 1, EDs: 0, EDistv: 0, EDists: 0, GPv: 1, GPs: 0, Pos: 1, Ori: 0, TDS-E: 2, TDS-M: 2, TDS-H: 2, Traj: 2}"
)
TDS = ("TDS-E", "TDS-M", "TDS-H")


def _attacker():
    from vla.gst import attack

    return attack


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _private(exported: Path) -> dict[str, dict]:
    return {p["id"]: p for p in _rows(exported.with_name(exported.name + ".answers.jsonl"))}


@pytest.fixture(scope="module")
def small(gst, tmp_path_factory):
    """The session's tiny set (one apartment) exported under the realistic profile, every question kept."""
    out = tmp_path_factory.mktemp("export") / "small"
    args = ["export", f"questions={gst}", f"out={out}", "perception=realistic", "export_tds=mixed", "progress=false"]
    assert gst_main(args) == 0
    return out


@pytest.fixture(scope="module")
def qset(tmp_path_factory):
    out = tmp_path_factory.mktemp("gst") / "q"
    args = ["generate", "split=test", f"scenes={SCENES}", f"out={out}", "progress=false", "env.use_meshes=false"]
    args += ["env.width=64", "env.height=64", "gen.views=1", "gen.stride=3", f"gen.per_scene={PER_SCENE}"]
    assert gst_main(args) == 0
    return out


@pytest.fixture(scope="module")
def exported(qset, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "set"
    assert gst_main(["export", f"questions={qset}", f"out={out}", "perception=realistic", "progress=false"]) == 0
    return out


def _chance_bound(n: int) -> float:
    """Percent right that a guesser at chance (1 in 4) exceeds with probability under 1 %, on n questions."""
    return 100.0 * float(binom.ppf(0.99, n, 0.25)) / n


# ------------------------------------------------------------------------------------------ attacker
@pytest.mark.slow
def test_nearest_neighbour_attacker_solves_the_raw_set_and_is_at_chance_on_the_export(qset, exported):
    """The attacker (vla/gst/attack.py: groups questions by how alike their videos are, matches each
    TDS option to the top-down images of its group, eliminates letters within a group) is competent: on
    the raw set -- and on the export as it was before the per-question disguises and TDS apart, which
    copied each source file once (`python -m vla.gst.attack runs/gst/old --answers
    runs/gst/old.answers.jsonl` on a 4-apartment set: TDS-E, TDS-M, TDS-H and Traj all 100.0) -- it
    answers nearly every choice question. On the export it still groups the questions by apartment (the
    disguises do not hide that two videos show one apartment), but a TDS question's options are the
    maps of its block and no question of its apartment shows a map, and letters are balanced over the
    whole set: it scores at chance, with its own groups and with the true apartments given to it. The
    bound is what a guesser at chance exceeds with probability under 1 % on that many questions."""
    a = _attacker()
    raw = a.attack(qset)
    truth = {r["id"]: r for r in raw["rows"]}
    s = a.score(raw["predictions"], truth)
    assert s["choice"] >= 90.0 and min(s[c] for c in TDS) >= 90.0, s
    private = _private(exported)
    for oracle in (False, True):
        rows = a.load_rows(exported)
        scenes = [private[r["id"]]["scene"] for r in rows]
        groups = [sorted(set(scenes)).index(x) for x in scenes] if oracle else None
        res = a.attack(exported, groups)
        if not oracle:  # the grouping itself works: the disguises are not what stops the attacker
            assert a.group_purity(res["groups"], scenes) >= 0.95
        s = a.score(res["predictions"], private)
        assert s["n"] >= 24 and s["choice"] <= _chance_bound(s["n"]), (oracle, s)


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


@pytest.mark.slow
def test_hash_and_pixel_shortcuts_work_on_the_raw_set_but_not_on_the_export(qset, exported):
    raw = _rows(qset / "questions.jsonl")
    truth = {r["id"]: r["answer"]["value"] for r in raw if r["subtask"] == "TDS-E"}
    for pixels in (False, True):
        preds = _hash_choice(raw, qset, pixels)
        assert preds and all(preds[i] == truth[i] for i in preds)  # the shortcut is real: 100 % on the raw set
    rows = _rows(exported / "questions.jsonl")
    private = list(_private(exported).values())
    for pixels in (False, True):
        preds = _hash_choice(rows, exported, pixels)
        scores, _ = score_predictions([p for p in private if p["id"] in preds], preds, bootstrap=20)
        assert scores["per_subtask"]["TDS-E"] <= _chance_bound(len(preds))  # no match: "A", chance


# ------------------------------------------------------------------------------------------ copies
def _mad(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute grey-level difference, the second image resized to the first's size."""
    import cv2

    b = cv2.resize(b, (a.shape[1], a.shape[0]), interpolation=cv2.INTER_AREA)
    return float(np.mean(np.abs(a.astype(np.float32) - b.astype(np.float32))))


def test_every_question_has_its_own_copies_and_no_two_files_are_near_duplicates(gst, small):
    """Each medium is a new file per question (before: one file per source, shared by every question of
    the apartment), and a copy is no near-duplicate of its source: a map's copy differs from its source
    by several grey levels on average (before: +-2 levels on 3 % of the pixels, a mean difference of
    0.07), two copies of one video by several levels in their first frames."""
    rows = _rows(small / "questions.jsonl")
    files = [f for r in rows for v in r["media"].values() for f in (v if isinstance(v, list) else [v])]
    assert len(files) == len(set(files)) == len(list((small / "media").iterdir()))
    assert len({hashlib.sha256((small / f).read_bytes()).hexdigest() for f in files}) == len(files)
    pngs = [f for f in files if f.endswith(".png")]
    assert len({hashlib.sha256(imageio.imread(small / f).tobytes()).hexdigest() for f in pngs}) == len(pngs)
    private = _private(small)
    raw = {q.id: q for q in load_questions(gst)}
    own = []
    for r in rows:
        if "map" in r["media"]:
            img = imageio.imread(small / r["media"]["map"])[..., :3]
            own.append(_mad(img, raw[private[r["id"]]["source"]].get("map")))
    assert own and min(own) >= 5.0, own
    videos = [r["media"]["video"] for r in rows if "video" in r["media"]]
    assert len(videos) >= 3
    first = [np.asarray(imageio.mimread(small / v, memtest=False)[0]) for v in videos]
    assert min(_mad(a, b) for i, a in enumerate(first) for b in first[i + 1 :]) >= 2.0


def test_the_export_names_no_scene_pose_or_answer_and_scores_against_the_private_file(gst, small, tmp_path):
    from vla.questions.answers import format_answer
    from vla.questions.subtasks import SUBTASKS

    raw = load_questions(gst)
    rows = _rows(small / "questions.jsonl")
    assert len(rows) == len(raw)  # export_tds=mixed keeps every question
    text = (small / "questions.jsonl").read_text()
    scenes = {q.scene for q in raw}
    for needle in [*scenes, *(s.replace("/", "-") for s in scenes), "T_world_cam", '"answer"', '"target']:
        assert needle not in text
    for r in rows:
        assert set(r) == {"id", "subtask", "prompt", "media", "meta"}
        assert set(r["meta"]) <= set(PUBLIC_META)
    assert all(len(p.name.split(".")[0]) == 16 for p in (small / "media").iterdir())  # random names only
    assert not list(small.glob("*answers*"))  # the private file lives outside the export
    private = small.with_name("small.answers.jsonl")
    truth = _rows(private)
    assert [t["source"] for t in truth] != [q.id for q in raw]  # not the generator's order
    perfect = tmp_path / "perfect.jsonl"
    lines = []
    for p in truth:
        kind = SUBTASKS[p["subtask"]].answer_type
        value = tuple(p["answer"]["value"]) if kind == "point" else p["answer"]["value"]
        lines.append(json.dumps({"id": p["id"], "prediction": format_answer(kind, value)}) + "\n")
    perfect.write_text("".join(lines))
    out = tmp_path / "scored"
    assert gst_main(["score", f"answers={private}", f"predictions={perfect}", f"out={out}", "progress=false"]) == 0
    assert json.loads((out / "scores.json").read_text())["overall"] == pytest.approx(100.0)


def test_streams_clips_and_views_are_recordings_of_their_own(gst, small):
    """Streams and clips are numbered from 0 (a clip no longer carries the video's step numbers), no
    clip frame equals a frame of its question's stream in any array, boxes stay inside the frames they
    mark, detector tables are listed by id, and a current view carries no pose."""
    from vla.questions.question import load_stream

    rows = _rows(small / "questions.jsonl")
    traj = [r for r in rows if r["subtask"] == "Traj"]
    assert traj
    for r in traj:
        stream, clip = load_stream(small / r["media"]["stream"]), load_stream(small / r["media"]["clip_stream"])
        assert [f.step for f in stream] == list(range(len(stream)))
        assert [f.step for f in clip] == list(range(len(clip)))
        for c in clip:
            for f in stream:
                assert not np.array_equal(c.rgb, f.rgb) and not np.array_equal(c.depth, f.depth)
                if c.instance.any() or f.instance.any():  # (two frames that see no object agree trivially)
                    assert not np.array_equal(c.instance, f.instance)
        for f in stream[:5]:
            assert list(f.labels) == sorted(f.labels)
    raw = load_questions(gst)
    for r in rows:
        if "boxes" in r["media"]:
            boxes = json.loads((small / r["media"]["boxes"]).read_text())
            n = len(imageio.mimread(small / r["media"]["video"], memtest=False))
            assert boxes and all(0 <= int(k) < n for k in boxes)
            assert all(0 <= x0 < x1 < 64 and 0 <= y0 < y1 < 64 for x0, y0, x1, y1 in boxes.values())
        if "current_sensors" in r["media"]:
            with np.load(small / r["media"]["current_sensors"]) as z:
                assert "T_world_cam" not in z.files
    # thinned: some copies of a video leave frames out, and lengths no longer name the apartment
    lengths = {len(q.get("stream")) for q in raw}
    exported_lengths = {len(load_stream(small / r["media"]["stream"])) for r in rows}
    assert len(exported_lengths) > len(lengths)


def test_answers_on_a_cropped_map_move_with_it(gst):
    """A GP or Pos answer is a point on the map: on the export's cropped and scaled copy it names the
    same spot of the drawing (checked with a mark drawn at the true point before the copy is made)."""
    from vla.gst.disguise import MapCopy

    q = next(q for q in load_questions(gst) if q.subtask == "Pos")
    img = q.get("map").copy()
    H, W = img.shape[:2]
    g = q.answer["value"]
    u, v = int((g[0] + 0.5) / 1000 * W), int((g[1] + 0.5) / 1000 * H)
    img[v - 3 : v + 4, u - 3 : u + 4] = (255, 0, 255)
    for seed in range(5):
        copy = MapCopy(img, np.random.default_rng(seed))
        h, w = copy.image.shape[:2]
        mark = np.argwhere((copy.image[..., 0] > 180) & (copy.image[..., 1] < 90) & (copy.image[..., 2] > 180))
        cy, cx = mark.mean(axis=0)
        gx, gy = copy.grid(g)
        assert abs((gx + 0.5) / 1000 * w - cx) < 2.0 and abs((gy + 0.5) / 1000 * h - cy) < 2.0


# ------------------------------------------------------------------------------------------ letters, TDS
@pytest.mark.slow
def test_letters_are_balanced_over_the_set_and_tds_is_asked_apart(qset, exported):
    """Over the export's choice questions each letter is right equally often (+-1); an apartment keeps
    its TDS questions or its map questions, never both; the TDS apartments come in blocks of four and
    every TDS question's options are its block's four maps, its own at the right letter."""
    a = _attacker()
    rows = _rows(exported / "questions.jsonl")
    private = _private(exported)
    letters = Counter(private[r["id"]]["answer"]["value"] for r in rows if "options" in r["media"])
    assert max(letters.values()) - min(letters.values()) <= 1 and len(letters) == 4
    tds_scenes = {private[r["id"]]["scene"] for r in rows if r["subtask"] in TDS}
    map_scenes = {
        private[r["id"]]["scene"] for r in rows if r["subtask"] not in TDS and ({"map", "options"} & set(r["media"]))
    }
    assert tds_scenes and map_scenes and not tds_scenes & map_scenes
    assert len(tds_scenes) % 4 == 0
    # each option matched to the raw set's maps (a matcher that undoes crops): which apartment it shows
    raw = load_questions(qset)
    maps = {}
    for q in raw:
        if q.subtask in TDS:
            maps[(q.scene, q.subtask)] = a.map_signature(q.get("options")["ABCD".index(q.answer["value"])], False)
    blocks = set()
    for r in rows:
        if r["subtask"] not in TDS:
            continue
        code, shown = r["subtask"], []
        for o in r["media"]["options"]:
            sig = a.map_signature(imageio.imread(exported / o)[..., :3], False)
            shown.append(min((s for s, c in maps if c == code), key=lambda s: a._distance(sig, maps[(s, code)])))
        assert len(set(shown)) == 4 and set(shown) <= tds_scenes
        assert shown["ABCD".index(private[r["id"]]["answer"]["value"])] == private[r["id"]]["scene"]
        blocks.add(frozenset(shown))
    assert sum(len(b) for b in blocks) == len(tds_scenes) == len(set().union(*blocks))  # disjoint blocks


# ------------------------------------------------------------------------------------------ in process
def test_in_process_agents_get_the_blind_view(gst):
    """``Question.for_agent`` gives what the export gives: no scene (its family only), no question
    directory, an opaque id, media as handles that name no path (the file's content hash instead), a
    Traj clip numbered from 0."""
    from vla.questions.question import MediaRef

    qs = load_questions(gst)
    tokens: dict[str, set[str]] = {}
    for q in qs:
        b = q.for_agent()
        assert b.scene == "house" and b.root is None and b.answer is None and set(b.meta) <= set(PUBLIC_META)
        text = repr(b.id) + repr(b.media)
        paths = [str(p) for v in q.media.values() for p in (v if isinstance(v, list) else [v])]
        names = [q.id, q.scene, q.scene.replace("/", "-"), "scenes", *paths]
        assert not any(n in text for n in names), (text, names)
        for key, value in q.media.items():
            ref = b.media[key]
            assert all(isinstance(r, MediaRef) for r in (ref if isinstance(ref, list) else [ref]))
            if not isinstance(value, list):
                tokens.setdefault(value, set()).add(ref.token)
        if "clip_stream" in q.media:
            clip = b.get("clip_stream")
            assert [f.step for f in clip] == list(range(len(clip)))
            assert [f.step for f in q.get("clip_stream")] != list(range(len(clip)))  # the video's steps
            assert all(np.array_equal(c.rgb, f.rgb) for c, f in zip(clip, q.get("clip_stream")))
    assert all(len(t) == 1 for t in tokens.values())  # a file has one token ...
    assert len({next(iter(t)) for t in tokens.values()}) == len(tokens)  # ... and different files different ones


@pytest.mark.slow
def test_the_memory_agent_answers_the_blind_view_as_the_named_one(gst):
    """Blindness costs the memory agent nothing: the same answers with and without names and paths."""
    from vla.questions.answering import MemoryAnswerer

    mine = [q for q in load_questions(gst) if q.subtask in ("EDv", "GPv", "Pos", "Traj")]
    assert len(mine) == 4
    named, blind = MemoryAnswerer(), MemoryAnswerer()
    public = [replace(q, answer=None, meta={k: v for k, v in q.meta.items() if k in PUBLIC_META}) for q in mine]
    assert [blind.answer(q.for_agent()) for q in mine] == [named.answer(q) for q in public]
