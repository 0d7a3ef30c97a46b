"""Generate the 12 GST-Bench subtasks from scene truth and a recorded video (docs/GST.md).

Constraints enforced here (each rejection is counted by reason in ``filtered``):

* object-localisation targets are **never visible** in the current view (its instance mask has no
  pixel of the target) and were seen in the video (>= ``min_seen_pixels`` in some frame); with
  ``local_image`` (the paper's "Local-Image" control) they are instead **visible** in the current view
  (>= ``min_seen_pixels`` there, a red box on it for visual targets), to measure how much of a score
  comes from seeing the target rather than integrating the video;
* offline current views are sampled **off the trajectory** (``view_offset_m`` from every recorded
  pose) and must **overlap** what the video saw (``min_overlap`` of their depth points fall in
  voxels the video observed);
* semantic targets are unique by category in the scene; visual targets are marked with a red box in
  the frames where they appear (the boxes also travel as pixel coordinates);
* TDS distractors are other scenes' maps at the same level; Traj distractors are other clips of the
  same scene that differ from the true clip;
* options are shuffled with a seeded RNG and balanced over A-D.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import backproject, camera_yaw, egocentric_bearing, transform_points

from envs.material import SceneMaterial
from .prompts import prompt
from vla.questions.question import Question
from vla.questions.subtasks import CHOICES, TDS_LEVEL, check_codes

RED = np.array([255, 0, 0], dtype=np.uint8)
DEFAULT_PER_SCENE = {
    "EDv": 2,
    "EDs": 2,
    "EDistv": 2,
    "EDists": 2,
    "GPv": 2,
    "GPs": 2,
    "Pos": 2,
    "Ori": 2,
    "TDS-E": 1,
    "TDS-M": 1,
    "TDS-H": 1,
    "Traj": 2,
}


@dataclass
class GenConfig:
    per_scene: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_PER_SCENE))
    views: int = 3  # offline current views per scene
    view_offset_m: tuple[float, float] = (0.5, 2.5)  # distance of a current view from the trajectory
    view_attempts: int = 200
    min_overlap: float = 0.5
    min_view_depth_m: float = 1.5  # median depth of a current view: nearer means it faces a wall up close
    min_view_objects: int = 1  # objects (>= min_seen_pixels each) a current view must show to be recognisable
    min_seen_pixels: int = 150  # a target "was seen" when it covered this many pixels in a frame
    box_min_pixels: int = 30  # frames where a visual target gets a red box
    min_distance_m: float = 0.5  # targets closer than this are degenerate
    map_level: str = "easy"  # the top-down map shown with GP, Pos, Ori and Traj
    traj_min_separation_m: float = 0.75  # distractor clips must differ by this much (mean distance)
    local_image: bool = False  # the "Local-Image" control: ED* targets visible in the current view
    seed: int = 0

    def __post_init__(self) -> None:
        check_codes(self.per_scene)
        if self.map_level not in ("easy", "medium", "hard"):
            raise ValueError(f"gst map_level must be easy, medium or hard, got {self.map_level!r}")


class Balancer:
    """Answer letters in shuffled blocks of four: over any 4k questions each letter is right k times."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng, self.block = rng, []

    def next(self) -> str:
        if not self.block:
            self.block = list(self.rng.permutation(CHOICES))
        return self.block.pop()


def arrange_options(correct: Any, distractors: list[Any], letter: str, rng: np.random.Generator) -> list[Any]:
    """Four options with ``correct`` at ``letter`` and the distractors in random order elsewhere."""
    others = [distractors[i] for i in rng.permutation(len(distractors))[:3]]
    idx = CHOICES.index(letter)
    return others[:idx] + [correct] + others[idx:]


# ---------------------------------------------------------------------------------------- helpers
def instance_stats(frames: list[CameraFrame]) -> dict[int, dict[int, tuple[int, list[int]]]]:
    """instance id -> {frame index: (pixel count, [x0, y0, x1, y1])} over the video."""
    out: dict[int, dict[int, tuple[int, list[int]]]] = {}
    for i, f in enumerate(frames):
        if f.instance is None:
            continue
        ids, counts = np.unique(f.instance, return_counts=True)
        for iid, n in zip(ids, counts):
            if iid <= 0:
                continue
            ys, xs = np.nonzero(f.instance == iid)
            out.setdefault(int(iid), {})[i] = (int(n), [int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())])
    return out


def seen_voxels(material: SceneMaterial, voxel: float = 0.1, pixel_stride: int = 4) -> np.ndarray:
    keys = []
    for f in material.frames:
        p = backproject(f.depth[::pixel_stride, ::pixel_stride], _strided_K(f.K, pixel_stride)).reshape(-1, 3)
        p = p[np.isfinite(p).all(axis=1) & (p[:, 2] > 0)]
        keys.append(_voxel_keys(transform_points(material.T_world_cam(f), p), voxel))
    return np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)


def _strided_K(K: np.ndarray, s: int) -> np.ndarray:
    Ks = K.copy()
    Ks[0, 0] /= s
    Ks[1, 1] /= s
    Ks[0, 2] /= s
    Ks[1, 2] /= s
    return Ks


def _voxel_keys(p: np.ndarray, voxel: float) -> np.ndarray:
    q = np.floor(p / voxel).astype(np.int64) + (1 << 20)
    return (q[:, 0] << 42) | (q[:, 1] << 21) | q[:, 2]


def overlap_fraction(
    material: SceneMaterial, view: CameraFrame, T_world_cam: np.ndarray, seen: np.ndarray, voxel: float = 0.1
) -> float:
    p = backproject(view.depth[::4, ::4], _strided_K(view.K, 4)).reshape(-1, 3)
    p = p[np.isfinite(p).all(axis=1) & (p[:, 2] > 0)]
    if len(p) == 0:
        return 0.0
    return float(np.isin(_voxel_keys(transform_points(T_world_cam, p), voxel), seen).mean())


def draw_box(rgb: np.ndarray, box: list[int], thickness: int = 2) -> np.ndarray:
    img = rgb.copy()
    x0, y0, x1, y1 = box
    h, w = img.shape[:2]
    x0, y0, x1, y1 = max(x0 - 1, 0), max(y0 - 1, 0), min(x1 + 1, w - 1), min(y1 + 1, h - 1)
    img[y0 : y0 + thickness, x0 : x1 + 1] = RED
    img[max(y1 - thickness + 1, 0) : y1 + 1, x0 : x1 + 1] = RED
    img[y0 : y1 + 1, x0 : x0 + thickness] = RED
    img[y0 : y1 + 1, max(x1 - thickness + 1, 0) : x1 + 1] = RED
    return img


# ---------------------------------------------------------------------------------------- generator
class QuestionGenerator:
    """Generates questions for one scene at a time; ``filtered`` counts rejections by reason."""

    def __init__(self, cfg: GenConfig, split: str = "test") -> None:
        self.cfg, self.split = cfg, split
        self.rng = np.random.default_rng(cfg.seed)
        self.balancer = Balancer(self.rng)
        self.filtered: Counter[str] = Counter()
        self._n = 0
        self._visual: dict[tuple, dict[str, Any]] = {}
        self._rejected: set[tuple] = set()
        self._base: dict[tuple, dict[str, Any]] = {}

    def _id(self, material: SceneMaterial, code: str) -> str:
        self._n += 1
        return f"{material.name.replace('/', '-')}-{code}-{self._n:05d}"

    # -------------------------------------------------------------- offline: views off the trajectory
    def offtrajectory_views(self, material: SceneMaterial, n: int) -> list[tuple[CameraFrame, np.ndarray]]:
        """(frame, T_world_cam) of views away from every recorded pose that overlap what the video saw."""
        grid = material.truth.navigable
        if grid is None or material.render is None:
            raise ValueError(f"{material.name}: offline current views need a navigable grid and a renderer")
        free = np.argwhere(grid.free)
        xy_traj = material.poses_world[:, :2]
        seen = seen_voxels(material)
        lo, hi = self.cfg.view_offset_m
        views = []
        for _ in range(self.cfg.view_attempts):
            if len(views) >= n:
                break
            cell = free[self.rng.integers(len(free))]
            xy = grid.cell_to_world(cell)
            d = float(np.min(np.hypot(*(xy_traj - xy).T)))
            if not lo <= d <= hi:
                self.filtered["view: too close to or too far from the trajectory"] += 1
                continue
            pose = np.array([xy[0], xy[1], self.rng.uniform(-np.pi, np.pi)])
            frame = material.render(pose)
            T = material.T_world_cam(frame)
            if not self._recognisable(frame):
                continue
            if overlap_fraction(material, frame, T, seen) < self.cfg.min_overlap:
                self.filtered["view: too little overlap with the video"] += 1
                continue
            views.append((frame, T))
        return views

    def _recognisable(self, frame: CameraFrame) -> bool:
        """Could anyone tell where a view was taken? Not when it shows a bare wall up close."""
        depth = frame.depth[np.isfinite(frame.depth) & (frame.depth > 0)]
        if depth.size == 0 or float(np.median(depth)) < self.cfg.min_view_depth_m:
            self.filtered["view: faces a wall up close"] += 1
            return False
        if frame.instance is not None and self.cfg.min_view_objects > 0:
            ids, counts = np.unique(frame.instance[frame.instance > 0], return_counts=True)
            objects = sum(1 for i, c in zip(ids, counts) if int(i) in frame.labels and c >= self.cfg.min_seen_pixels)
            if objects < self.cfg.min_view_objects:
                self.filtered["view: shows no object"] += 1
                return False
        return True

    # -------------------------------------------------------------- object localisation
    def _reject(self, reason: str, *key) -> None:
        """Count a rejected (reason, view, target) once, however often it is reconsidered."""
        if (reason, *key) not in self._rejected:
            self._rejected.add((reason, *key))
            self.filtered[reason] += 1

    def _targets(self, material: SceneMaterial, stats, semantic: bool, view: CameraFrame | None) -> list:
        counts = Counter(o.category for o in material.truth.objects)
        vkey = None if view is None else id(view)
        out = []
        for o in material.truth.objects:
            if o.instance_id is None:
                continue
            if semantic and counts[o.category] != 1:
                self._reject("target: category not unique (semantic)", o.id)
                continue
            seen = stats.get(o.instance_id, {})
            if not seen or max(n for n, _ in seen.values()) < self.cfg.min_seen_pixels:
                self._reject("target: not seen in the video", o.id)
                continue
            if view is not None and view.instance is not None:
                in_view = int(np.count_nonzero(view.instance == o.instance_id))
                if self.cfg.local_image and in_view < self.cfg.min_seen_pixels:
                    self._reject("target: not visible in the current view (local image)", vkey, o.id)
                    continue
                if not self.cfg.local_image and in_view:
                    self._reject("target: visible in the current view", vkey, o.id)
                    continue
            out.append(o)
        return out

    def _visual_media(self, material: SceneMaterial, stats, obj) -> dict[str, Any]:
        """The video with the target's red box where it appears (one shared copy per target)."""
        key = (material.name, obj.id, len(material.frames))
        if key not in self._visual:
            boxes = {i: b for i, (n, b) in stats[obj.instance_id].items() if n >= self.cfg.box_min_pixels}
            video = [draw_box(f.rgb, boxes[i]) if i in boxes else f.rgb for i, f in enumerate(material.frames)]
            self._visual[key] = {"video": video, "boxes": {str(i): b for i, b in boxes.items()}}
        return dict(self._visual[key])

    def _base_media(self, material: SceneMaterial) -> dict[str, Any]:
        key = (material.name, len(material.frames))
        if key not in self._base:
            self._base[key] = {"video": [f.rgb for f in material.frames], "stream": material.frames}
        return dict(self._base[key])

    def object_questions(
        self,
        material: SceneMaterial,
        view: CameraFrame,
        T_world_cam: np.ndarray,
        pose_known: bool,
        stats,
        quota: Counter,
    ) -> list[Question]:
        out = []
        cam_xy = T_world_cam[:2, 3]
        for code in ("EDv", "EDs", "EDistv", "EDists"):
            if quota[code] <= 0 or code not in material.supported:
                continue
            semantic = code.endswith("s")
            cands = self._targets(material, stats, semantic, view)
            far = [o for o in cands if np.hypot(*(o.box.center[:2] - cam_xy)) >= self.cfg.min_distance_m]
            for o in cands:
                if o not in far:
                    self._reject("target: too close to the current view", id(view), o.id)
            cands = far
            if not cands:
                continue
            obj = cands[self.rng.integers(len(cands))]
            direction, distance = egocentric_bearing(T_world_cam, obj.box.center)
            media = self._base_media(material)
            if not semantic:
                media.update(self._visual_media(material, stats, obj))
            media["current_view"] = view.rgb
            if self.cfg.local_image and not semantic:  # the target is marked in the current view too
                ys, xs = np.nonzero(view.instance == obj.instance_id)
                media["current_view"] = draw_box(view.rgb, [int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())])
            media["current_sensors"] = view
            answer = (
                {"type": "angle", "value": round(direction)}
                if code in ("EDv", "EDs")
                else {"type": "distance", "value": round(distance, 2)}
            )
            out.append(
                Question(
                    id=self._id(material, code),
                    subtask=code,
                    scene=material.name,
                    prompt=prompt(code, obj.category, self.cfg.local_image),
                    media=media,
                    answer=answer,
                    meta={
                        "category": obj.category if semantic else None,
                        "target": obj.id,
                        "target_instance": obj.instance_id,
                        "T_world_cam": T_world_cam,
                        **({"control": "local_image"} if self.cfg.local_image else {}),
                    },
                    current_pose=view.T_world_cam if pose_known else None,
                )
            )
            quota[code] -= 1
        return out

    def map_point_questions(self, material: SceneMaterial, stats, quota: Counter) -> list[Question]:
        out = []
        tdf, map_img = material.topdown, material.maps[self.cfg.map_level]
        for code in ("GPv", "GPs"):
            if code not in material.supported:
                continue
            semantic = code == "GPs"
            cands = self._targets(material, stats, semantic, None)
            self.rng.shuffle(cands)
            for obj in cands[: quota[code]]:
                uv = tdf.world_to_pixel(obj.box.center[:2])
                if not (0 <= uv[0] < tdf.width and 0 <= uv[1] < tdf.height):
                    self.filtered["target: outside the map"] += 1
                    continue
                media = self._base_media(material)
                if not semantic:
                    media.update(self._visual_media(material, stats, obj))
                media["map"] = map_img
                g = tdf.world_to_grid(obj.box.center[:2])
                out.append(
                    Question(
                        id=self._id(material, code),
                        subtask=code,
                        scene=material.name,
                        prompt=prompt(code, obj.category),
                        media=media,
                        answer={"type": "point", "value": [int(g[0]), int(g[1])]},
                        meta={
                            "category": obj.category if semantic else None,
                            "target": obj.id,
                            "target_instance": obj.instance_id,
                            "level": self.cfg.map_level,
                        },
                    )
                )
                quota[code] -= 1
        return out

    # -------------------------------------------------------------- self localisation
    def self_questions(
        self, material: SceneMaterial, view: CameraFrame, T_world_cam: np.ndarray, pose_known: bool, quota: Counter
    ) -> list[Question]:
        out = []
        tdf = material.topdown
        for code in ("Pos", "Ori"):
            if quota[code] <= 0 or code not in material.supported:
                continue
            media = self._base_media(material)
            media.update(current_view=view.rgb, current_sensors=view, map=material.maps[self.cfg.map_level])
            if code == "Pos":
                g = tdf.world_to_grid(T_world_cam[:2, 3])
                answer = {"type": "point", "value": [int(g[0]), int(g[1])]}
            else:
                answer = {"type": "angle", "value": round(tdf.yaw_to_map_heading(camera_yaw(T_world_cam)))}
            out.append(
                Question(
                    id=self._id(material, code),
                    subtask=code,
                    scene=material.name,
                    prompt=prompt(code),
                    media=media,
                    answer=answer,
                    meta={"T_world_cam": T_world_cam, "level": self.cfg.map_level},
                    current_pose=view.T_world_cam if pose_known else None,
                )
            )
            quota[code] -= 1
        return out

    # -------------------------------------------------------------- scene structure
    def tds_questions(
        self, material: SceneMaterial, pool: dict[str, dict[str, np.ndarray]], quota: Counter
    ) -> list[Question]:
        out = []
        others = [name for name in pool if name != material.name]
        for code, level in TDS_LEVEL.items():
            if code not in material.supported:
                continue
            for _ in range(quota[code]):
                if len(others) < 3:
                    self.filtered["TDS: fewer than 3 other scenes for distractors"] += 1
                    break
                picks = [others[i] for i in self.rng.permutation(len(others))[:3]]
                own = material.maps[level]
                if any(np.array_equal(pool[p][level], own) for p in picks):
                    self.filtered["TDS: degenerate options (identical maps)"] += 1
                    continue
                letter = self.balancer.next()
                options = arrange_options(("self", own), [(p, pool[p][level]) for p in picks], letter, self.rng)
                media = self._base_media(material)
                media["options"] = [img for _, img in options]
                out.append(
                    Question(
                        id=self._id(material, code),
                        subtask=code,
                        scene=material.name,
                        prompt=prompt(code),
                        media=media,
                        answer={"type": "choice", "value": letter},
                        meta={"level": level, "num_options": 4, "option_scenes": [n for n, _ in options]},
                    )
                )
                quota[code] -= 1
        return out

    def traj_questions(self, material: SceneMaterial, quota: Counter) -> list[Question]:
        out = []
        if "Traj" not in material.supported or quota["Traj"] <= 0:
            return out
        clips = list(material.clips)
        frame_steps = np.array([f.step for f in material.frames])
        paths = [material.poses_world[s:e, :2] for s, e in clips]
        from envs.ground_nav.draw import draw_route  # the GST overlay (red path, blue start)

        for ci in self.rng.permutation(len(clips)):
            if quota["Traj"] <= 0:
                break
            s, e = clips[ci]
            true = paths[ci]

            def differs(j):
                other = paths[j]
                n = min(len(other), len(true))
                return j != ci and float(np.mean(np.hypot(*(other[:n] - true[:n]).T))) >= self.cfg.traj_min_separation_m

            distractors = [j for j in range(len(clips)) if differs(j)]
            if len(distractors) < 3:
                self.filtered["Traj: fewer than 3 distinct distractor clips"] += 1
                continue
            letter = self.balancer.next()
            chosen = arrange_options(ci, distractors, letter, self.rng)
            base = material.maps[self.cfg.map_level]
            options = [draw_route(base.copy(), material.topdown, paths[j]) for j in chosen]
            in_clip = [f for f, st in zip(material.frames, frame_steps) if s <= st < e]
            if len(in_clip) < 2:
                self.filtered["Traj: clip has too few frames"] += 1
                continue
            media = self._base_media(material)
            media.update(clip_video=[f.rgb for f in in_clip], clip_stream=in_clip, options=options)
            out.append(
                Question(
                    id=self._id(material, "Traj"),
                    subtask="Traj",
                    scene=material.name,
                    prompt=prompt("Traj"),
                    media=media,
                    answer={"type": "choice", "value": letter},
                    meta={"level": self.cfg.map_level, "num_options": 4, "clips": [list(clips[j]) for j in chosen]},
                )
            )
            quota["Traj"] -= 1
        return out

    # -------------------------------------------------------------- one scene
    def start_scene(self, seed: int) -> None:
        """Per-scene RNG and balancing, so a scene's questions do not depend on the scenes before it
        (a resumed generation writes exactly what an uninterrupted one would)."""
        self.rng = np.random.default_rng([self.cfg.seed, seed])
        self.balancer = Balancer(self.rng)
        self._n = 0
        self._visual.clear()
        self._base.clear()
        self._rejected.clear()

    def scene_offline(self, material: SceneMaterial, pool: dict[str, dict[str, np.ndarray]]) -> list[Question]:
        quota = Counter({k: v for k, v in self.cfg.per_scene.items() if k in material.supported})
        stats = instance_stats(material.frames)
        questions: list[Question] = []
        needs_view = any(quota[c] for c in ("EDv", "EDs", "EDistv", "EDists", "Pos", "Ori"))
        views = self.offtrajectory_views(material, self.cfg.views) if needs_view else []
        if needs_view and not views:
            self.filtered["scene: no valid off-trajectory view"] += 1
        rounds = 0
        while views and any(quota[c] > 0 for c in ("EDv", "EDs", "EDistv", "EDists", "Pos", "Ori")) and rounds < 4:
            for frame, T in views:
                view = CameraFrame(
                    rgb=frame.rgb,
                    depth=frame.depth,
                    K=frame.K,
                    T_world_cam=np.eye(4),
                    instance=frame.instance,
                    labels=frame.labels,
                    step=frame.step,
                )
                questions += self.object_questions(material, view, T, False, stats, quota)
                questions += self.self_questions(material, view, T, False, quota)
            rounds += 1
        questions += self.map_point_questions(material, stats, quota)
        questions += self.tds_questions(material, pool, quota)
        questions += self.traj_questions(material, quota)
        for code, left in quota.items():
            if left > 0:
                self.filtered[f"{code}: quota not met ({left} missing)"] += left
        return questions

    def iter_codes(self) -> Iterator[str]:
        return iter(self.cfg.per_scene)
