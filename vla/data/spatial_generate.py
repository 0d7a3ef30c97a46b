"""``vla-data spatial``: spatial-perception question sets from rendered scenes (docs/SPATIAL.md).

Scenes: apartments of a split (``family=house``: house seeds, docs/HOUSE.md) or LIBERO tabletops
(``family=libero``: a suite's tasks with **sampled** init states, never the official ones; the splits
use disjoint trial ranges, ``envs.libero.family.SPATIAL_TRIALS``; any family with
:class:`envs.registry.HasSpatialScenes` lists its own). Per scene, ``views`` rendered RGB-D views (a
LIBERO scene: its agentview frame) and on each up to ``per_view`` questions of each task type in ``tasks``
(:mod:`vla.questions.perception.questions`), the answers exact from the scene truth.

Under ``out/<split>/``: ``images/<scene>/*.png``, ``records.<tag>.jsonl`` (one question a line:
id, task, scene, prompt with one ``<image>`` per image, image paths, answer string, ``truth`` as
numbers, meta) and ``scenes.<tag>.jsonl`` (one line per finished scene), ``<tag>`` = the family and,
with ``shards=N``, ``<shard>-of-<N>`` (shard ``k`` takes every N-th scene from the k-th, so shards
can run at once, here or on other machines, into the same directory). ``options.<tag>.json`` holds
the options; a rerun with other options is refused. A killed run resumes: a scene's records count
only once its line is in ``scenes.<tag>.jsonl``, so a rerun drops a half-written scene and
regenerates it exactly (each scene's random stream is a function of ``seed`` and its name).
"""

from __future__ import annotations

import io
import json
import math
import os
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envs.base import NoEpisode, RendersPose
from vla_common.strict import from_dict

from vla.questions.perception.questions import SINGLE_VIEW, Item, View, motion_question, view_questions
from vla.questions.perception.tasks import SPATIAL_TASKS, check_tasks

SPLITS = ("train", "val", "test")


def spatial_families() -> list[str]:
    """The registered env families whose scenes can be rendered for these questions."""
    from envs.registry import HasSpatialScenes, family, names

    return [n for n in names() if isinstance(family(n), HasSpatialScenes)]


IDENTITY = (
    "family",
    "split",
    "suite",
    "resolution",
    "views",
    "tasks",
    "per_view",
    "min_pixels",
    "motion",
    "use_meshes",
    "seed",
    "shards",
)


@dataclass(frozen=True)
class SpatialOptions:
    family: str = "house"  # house | libero
    split: str = "train"  # train | val | test
    scenes: int = 10  # scenes of the split, from first_scene
    first_scene: int = 0
    suite: str = "libero_goal"  # family=libero
    libero_tasks: list[int] | None = None  # family=libero: the suite's task ids the scenes cycle over (None: all)
    resolution: int = 112  # image height = width
    views: int = 4  # rendered views per apartment (a LIBERO scene has one, its agentview frame)
    tasks: tuple[str, ...] = SPATIAL_TASKS  # the task types asked (CONTROL_TASKS: the stage-2 control set)
    per_view: int = 1  # questions of each task type per view (fewer where a view has nothing to ask)
    min_pixels: int = 0  # a named or counted object covers this many pixels (0: 0.3 % of the image)
    motion: tuple[float, float, float] = (1.0, 0.5, 30.0)  # camera_motion: max forward m, |left| m, |turn| deg
    use_meshes: bool = True  # family=house: LIBERO furniture meshes (false: boxes only, faster)
    shards: int = 1
    shard: int = 0
    out: str = "runs/spatial"
    backend: str = "local"  # local | ray (every scene a Ray task)
    seed: int = 0
    progress: bool = True
    ray: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "motion", tuple(float(x) for x in self.motion))
        object.__setattr__(self, "tasks", tuple(self.tasks))
        have = spatial_families()
        if self.family not in have:
            raise ValueError(
                f"spatial family must be one of {have} (families with spatial scenes), got {self.family!r}"
            )
        if self.split not in SPLITS:
            raise ValueError(f"spatial split must be one of {SPLITS}, got {self.split!r}")
        check_tasks(self.tasks)
        if not self.tasks or int(self.per_view) < 1:
            raise ValueError(
                f"tasks must name at least one task type and per_view be >= 1, got {list(self.tasks)}, {self.per_view}"
            )
        if int(self.scenes) < 1 or int(self.first_scene) < 0:
            raise ValueError(
                f"scenes must be >= 1 and first_scene >= 0, got scenes={self.scenes} first_scene={self.first_scene}"
            )
        if int(self.resolution) < 16 or int(self.views) < 1:
            raise ValueError(f"resolution must be >= 16 and views >= 1, got {self.resolution}, {self.views}")
        if not 0 <= int(self.shard) < int(self.shards):
            raise ValueError(f"shard must be in [0, shards={self.shards}), got {self.shard}")
        if self.backend not in ("local", "ray"):
            raise ValueError(f"backend must be local or ray, got {self.backend!r}")
        if len(self.motion) != 3 or min(self.motion) <= 0:
            raise ValueError(f"motion must be three positive numbers (forward m, left m, turn deg), got {self.motion}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SpatialOptions":
        return from_dict(cls, d, "spatial")

    @property
    def tag(self) -> str:
        return self.family + (f".{self.shard}-of-{self.shards}" if self.shards > 1 else "")

    def identity(self) -> dict[str, Any]:
        d = asdict(self)
        d["motion"], d["tasks"] = list(self.motion), list(self.tasks)
        return {k: d[k] for k in IDENTITY}


# --------------------------------------------------------------------------------------- scenes
def scene_list(opts: SpatialOptions) -> list[dict[str, Any]]:
    """Every scene of the options' range (all shards): name and how to build it (the family's own list,
    :class:`envs.registry.HasSpatialScenes`)."""
    from envs.registry import family

    options = {"use_meshes": opts.use_meshes, "suite": opts.suite, "libero_tasks": opts.libero_tasks}
    return family(opts.family).spatial_scenes(
        opts.split, int(opts.first_scene), int(opts.scenes), int(opts.resolution), options
    )


def _rng(opts: dict[str, Any], name: str) -> np.random.Generator:
    return np.random.default_rng([int(opts["seed"]), zlib.crc32(name.encode())])


def _posed_views(env, opts: dict[str, Any], rng, min_pixels: int) -> list[tuple[View, View | None]]:
    """(view, moved view or None) per wanted view: poses on free cells showing >= 2 objects."""
    from vla.questions.perception.questions import present

    truth = env.scene_truth()
    grid = truth.navigable
    free = np.argwhere(grid.free)
    fwd_max, left_max, turn_max = opts["motion"]
    want_motion = "camera_motion" in opts["tasks"]
    out: list[tuple[View, View | None]] = []

    def render(pose):
        f = env.render_pose(np.asarray(pose, float))
        return View(f, env.T_world_odom @ f.T_world_cam)

    for _ in range(30 * int(opts["views"])):
        if len(out) >= int(opts["views"]):
            break
        xy = grid.cell_to_world(free[rng.integers(len(free))])
        yaw = float(rng.uniform(-math.pi, math.pi))
        view = render([xy[0], xy[1], yaw])
        if sum(1 for _, n in present(view.frame, truth).values() if n >= min_pixels) < 2:
            continue
        moved = None
        # the moved pose is drawn whatever the tasks, so that sets of other task types (the control set)
        # see the very same views; it is rendered only when camera_motion is asked
        for _ in range(10):
            f, left = rng.uniform(0.1, fwd_max), rng.uniform(-left_max, left_max)
            turn = math.radians(rng.uniform(-turn_max, turn_max))
            p = xy + f * np.array([math.cos(yaw), math.sin(yaw)]) + left * np.array([-math.sin(yaw), math.cos(yaw)])
            if bool(grid.is_free(p[None])[0]):
                moved = render([p[0], p[1], yaw + turn]) if want_motion else None
                break
        out.append((view, moved))
    return out


_ENV: dict[str, Any] = {}  # this process's last env (a LIBERO env takes minutes to build; its scenes share it)


def _env_for(scene: dict[str, Any]):
    from envs.registry import make_env

    key = json.dumps([scene["env"], scene["task"]], sort_keys=True)
    if _ENV.get("key") != key:
        close_env()
        _ENV.update(key=key, env=make_env(scene["env"], int(scene["task"])))
    return _ENV["env"]


def close_env() -> None:
    env = _ENV.pop("env", None)
    _ENV.pop("key", None)
    if env is not None:
        env.close()


def scene_items(opts: dict[str, Any], scene: dict[str, Any]) -> tuple[list[Item], int]:
    """One scene's questions (a worker's job with backend=ray) and the number of views rendered. The
    env is kept for the next scene of the same task (LIBERO: other sampled placements)."""
    rng = _rng(opts, scene["name"])
    res = int(opts["resolution"])
    min_pixels = int(opts["min_pixels"]) or max(4, round(0.003 * res * res))
    quota = {t: int(opts["per_view"]) for t in SINGLE_VIEW if t in opts["tasks"]}
    env = _env_for(scene)
    try:
        obs, _ = env.reset(options={"trial": int(scene["trial"])})
    except BaseException:
        close_env()
        raise
    truth = env.scene_truth()
    if isinstance(env, RendersPose):  # a camera that goes anywhere: views from free poses, and moves
        pairs = _posed_views(env, opts, rng, min_pixels)
    else:  # a fixed camera (LIBERO's agentview; its world is the table's: no odometry frame)
        frame = obs.cameras["agentview"]
        pairs = [(View(frame, frame.T_world_cam), None)]
    items: list[Item] = []
    for view, moved in pairs:
        items += view_questions(view, truth, quota, rng, min_pixels)
        if moved is not None:
            items.append(motion_question(view, moved))
    return items, len(pairs)


def _png(img: np.ndarray) -> bytes:
    import imageio.v3 as iio

    buf = io.BytesIO()
    iio.imwrite(buf, np.asarray(img, dtype=np.uint8), extension=".png")
    return buf.getvalue()


def encode_scene(opts: dict[str, Any], scene: dict[str, Any]) -> dict[str, Any]:
    """One scene as record rows and PNG files ``{relative path: bytes}`` (shared images written once)."""
    t0 = time.time()
    try:
        items, views = scene_items(opts, scene)
    except NoEpisode as exc:  # the scene has no usable episode (e.g. no navigation target): no questions
        return {"rows": [], "files": {}, "views": 0, "seconds": round(time.time() - t0, 2), "skipped": str(exc)}
    slug = scene["name"].replace("/", "-")
    files: dict[str, bytes] = {}
    names: dict[int, str] = {}
    rows = []
    for k, it in enumerate(items):
        paths = []
        for img in it.images:
            if id(img) not in names:
                names[id(img)] = f"images/{slug}/{len(names):03d}.png"
                files[names[id(img)]] = _png(img)
            paths.append(names[id(img)])
        rows.append(
            {
                "id": f"{slug}-{k:03d}",
                "task": it.task,
                "scene": scene["name"],
                "split": opts["split"],
                "family": opts["family"],
                "prompt": it.prompt,
                "images": paths,
                "answer": it.answer,
                "truth": it.truth,
                "meta": it.meta,
            }
        )
    return {"rows": rows, "files": files, "views": views, "seconds": round(time.time() - t0, 2)}


# --------------------------------------------------------------------------------------- run
def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def generate(cfg: dict[str, Any]) -> dict[str, Any]:
    """Generate (or resume) one shard of a split; returns counts for this run and in total."""
    from vla.gst.cli import _append_jsonl, _read_jsonl_tolerant, _run_scenes

    opts = SpatialOptions.from_dict(cfg)
    out = Path(opts.out) / opts.split
    out.mkdir(parents=True, exist_ok=True)
    ident = out / f"options.{opts.tag}.json"
    if ident.exists():
        old = json.loads(ident.read_text())
        diff = sorted(k for k in IDENTITY if old.get(k) != opts.identity()[k])
        if diff:
            raise ValueError(f"{out} was generated with other options {diff} (delete it or choose another out=)")
    else:
        tmp = ident.with_suffix(".tmp")
        tmp.write_text(json.dumps(opts.identity(), indent=2))
        os.replace(tmp, ident)
    scenes = scene_list(opts)[opts.shard :: opts.shards]
    done_path, rec_path = out / f"scenes.{opts.tag}.jsonl", out / f"records.{opts.tag}.jsonl"
    done = {r["scene"] for r in _read_jsonl_tolerant(done_path)}
    records = _read_jsonl_tolerant(rec_path)
    kept = [r for r in records if r["scene"] in done]
    if len(kept) != len(records):  # a scene killed half-way: its records go, it is generated again
        tmp = rec_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
        os.replace(tmp, rec_path)
    todo = sorted((s for s in scenes if s["name"] not in done), key=lambda s: (s["task"], s["trial"]))
    plain = {**asdict(opts), "motion": list(opts.motion), "tasks": list(opts.tasks)}
    t0, new = time.time(), 0
    skipped: list[str] = []
    with open(rec_path, "a") as rec, open(done_path, "a") as fin:

        def write(i: int, result: dict[str, Any]) -> None:
            nonlocal new
            for rel, data in result["files"].items():
                p = out / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                tmp = p.with_suffix(".tmp")
                tmp.write_bytes(data)
                os.replace(tmp, p)
            rec.write("".join(json.dumps(_jsonable(r)) + "\n" for r in result["rows"]))
            rec.flush()
            os.fsync(rec.fileno())
            line = {"scene": todo[i]["name"], "questions": len(result["rows"]), "views": result["views"]}
            if result.get("skipped"):
                line["skipped"] = result["skipped"]
                skipped.append(todo[i]["name"])
            _append_jsonl(fin, {**line, "seconds": result["seconds"]})
            new += len(result["rows"])

        run_cfg = {"backend": opts.backend, "ray": opts.ray, "progress": opts.progress}
        try:
            _run_scenes(run_cfg, encode_scene, [(plain, s) for s in todo], write, f"spatial {opts.family}/{opts.split}")
        finally:
            close_env()
    seconds = time.time() - t0
    return {
        "out": str(out),
        "scenes": len(scenes),
        "scenes_this_run": len(todo),
        "questions_this_run": new,
        "questions": len(kept) + new,
        "skipped_this_run": skipped,  # scenes without a usable episode: done, with no questions
        "seconds": round(seconds, 1),
        "per_hour": round(3600.0 * new / seconds, 1) if seconds > 0 and new else 0.0,
    }


def load_records(root: str | Path) -> list[dict[str, Any]]:
    """Every finished scene's records of a split directory (all envs and shards)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no spatial question directory {root}")
    rows = []
    for rec in sorted(root.glob("records.*.jsonl")):
        done_path = rec.with_name("scenes." + rec.name[len("records.") :])
        done = set()
        if done_path.exists():
            for line in done_path.read_text().splitlines():
                try:
                    done.add(json.loads(line)["scene"])
                except (ValueError, KeyError):
                    continue
        for line in rec.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("scene") in done:
                rows.append(r)
    return rows
