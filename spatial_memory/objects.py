"""The object registry: what the memory knows about each object instance.

Per object: a bounded sample of world points on its surface (reservoir sampling over frames, each
frame contributing at most ``points_per_frame``), a robust gravity-aligned box fitted to the sample
(yaw of the minimum-area footprint, extents between the 2nd and 98th percentiles), and/or a running
mean of 3D boxes given by a detector; category, first/last step seen, number of observations.

Association of a new observation to an existing object:
- ``"instance"``: by instance id (the simulator's masks keep ids stable across frames);
- ``"proximity"``: by category and 3D distance (detector mode: ids are frame-local), greedy
  one-to-one, nearest first, within ``max(assoc_distance, 0.5 * object diagonal)``.

Detector mode (``"proximity"``) also keeps evidence per object and merges what a detector splits:
:mod:`.evidence` (:class:`~.evidence.DetectorEvidence`, a base of :class:`ObjectRegistry`).

Objects that move are handled by free-space carving: sample points that a new depth image sees
through are dropped (:func:`._kernels.carve_object_points`), so the sample follows the object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _object_kernels as okern
from .draw import box_footprint
from .evidence import DetectorEvidence, inside_box
from .geometry import rot_z, yaw_of_rotation

ASSOCIATIONS = ("instance", "proximity")
_Q_LO, _Q_HI = 0.02, 0.98


@dataclass(frozen=True, eq=False)
class MemoryObject:
    """A read-only view of one object in memory (world = the memory's frame, metres).

    ``center``/``size``/``yaw`` describe a gravity-aligned box (``yaw``: radians of the box's x axis
    from world +x, counter-clockwise). ``instance_id`` is the mask id it was tracked by (instance
    association), else None. ``n_points``: size of the current surface sample.
    """

    id: str
    category: str
    center: np.ndarray
    size: np.ndarray
    yaw: float
    first_seen: int
    last_seen: int
    n_observations: int
    n_points: int
    instance_id: int | None = None

    @property
    def R(self) -> np.ndarray:
        return rot_z(self.yaw)

    def footprint(self) -> np.ndarray:
        """4x2 world-xy corners of the box's footprint (drawn on medium maps)."""
        return box_footprint(self.center, self.size, self.R)


def fit_box(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(center, size, yaw) of a gravity-aligned box around Nx3 points, robust to a few outliers.

    The yaw minimises the footprint area (5 degree search refined to 0.5 degree); extents run from the
    2nd to the 98th percentile along the box's axes and z. A box is the same after a 90 degree turn,
    so yaw lies in [0, pi/2). See :func:`._kernels.fit_gravity_box`.
    """
    p = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 3)
    if len(p) == 0:
        raise ValueError("fit_box needs at least one point")
    out = okern.fit_gravity_box(p, _Q_LO, _Q_HI)
    return out[:3].copy(), out[3:6].copy(), float(out[6])


def gravity_aligned_box(
    center: np.ndarray, size: np.ndarray, R_world_box: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """(center, size, yaw) of the smallest gravity-aligned box (yawed like the given box) holding an
    oriented box's 8 corners; yaw folded into [0, pi/2) with sizes swapped to match."""
    R = np.asarray(R_world_box, dtype=np.float64)
    yaw = float(np.mod(yaw_of_rotation(R), np.pi / 2))
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)
    corners_local = ((signs * np.asarray(size, dtype=np.float64) / 2) @ R.T) @ rot_z(yaw)  # p_yawed = Rz(yaw)^T p
    return np.asarray(center, dtype=np.float64).copy(), corners_local.max(axis=0) - corners_local.min(axis=0), yaw


class ObjectRegistry(DetectorEvidence):
    """Objects as parallel arrays (index = order of creation) plus a few per-object Python values."""

    def __init__(
        self,
        association: str = "instance",
        max_points: int = 256,
        points_per_frame: int = 32,
        assoc_distance: float = 0.3,
        box_weight_max: int = 20,
        seed: int = 0,
        min_support: float = 0.0,
        min_observations: int = 1,
        merge: bool | None = None,
        detect_range: float = 6.0,
        detect_pixels: float = 24.0,
    ):
        if association not in ASSOCIATIONS:
            raise ValueError(f"association must be one of {ASSOCIATIONS}, got {association!r}")
        if max_points < 8 or points_per_frame < 1 or points_per_frame > max_points:
            raise ValueError(
                f"need max_points >= 8 and 1 <= points_per_frame <= max_points, got {max_points}, {points_per_frame}"
            )
        self.association = association
        self.max_points = int(max_points)
        self.points_per_frame = int(points_per_frame)
        self.assoc_distance = float(assoc_distance)
        self.box_weight_max = int(box_weight_max)
        self.rng = np.random.default_rng(seed)
        self.min_support = float(min_support)
        self.min_observations = int(min_observations)
        self.merge = association == "proximity" if merge is None else bool(merge)
        self.detect_range = float(detect_range)
        self.detect_pixels = float(detect_pixels)
        self.votes: list[dict[str, int]] = []  # per object: detections per category
        self.ids: list[str] = []
        self.categories: list[str] = []
        self._suffix: dict[str, int] = {}
        self._by_instance: dict[int, int] = {}
        self._by_id: dict[str, int] = {}
        self._by_category: dict[str, list[int]] = {}
        self._dirty: set[int] = set()  # objects whose box must be refitted
        self.a = self._empty_arrays(0)

    def _empty_arrays(self, n: int) -> dict[str, np.ndarray]:
        M = self.max_points
        return {
            "points": np.zeros((n, M, 3), dtype=np.float32),
            "npts": np.zeros(n, dtype=np.int64),
            "offered": np.zeros(n, dtype=np.int64),  # sample points ever offered to the reservoir
            "instance_id": np.full(n, -1, dtype=np.int64),
            "first_seen": np.zeros(n, dtype=np.int64),
            "last_seen": np.zeros(n, dtype=np.int64),
            "n_obs": np.zeros(n, dtype=np.int64),
            "center": np.zeros((n, 3), dtype=np.float64),
            "size": np.zeros((n, 3), dtype=np.float64),
            "yaw": np.zeros(n, dtype=np.float64),
            "box_n": np.zeros(n, dtype=np.int64),  # detector boxes fused so far
            "box_center": np.zeros((n, 3), dtype=np.float64),
            "box_size": np.zeros((n, 3), dtype=np.float64),
            "box_yaw": np.zeros(n, dtype=np.float64),
            "chances": np.zeros(n, dtype=np.int64),  # frames in which it should have been detected
            "alias": np.full(n, -1, dtype=np.int64),  # the object it was merged into (-1: itself)
        }

    def __len__(self) -> int:
        return len(self.ids)

    def view(self, o: int) -> MemoryObject:
        a = self.a
        iid = int(a["instance_id"][o])
        return MemoryObject(
            id=self.ids[o],
            category=self.categories[o],
            center=a["center"][o].copy(),
            size=a["size"][o].copy(),
            yaw=float(a["yaw"][o]),
            first_seen=int(a["first_seen"][o]),
            last_seen=int(a["last_seen"][o]),
            n_observations=int(a["n_obs"][o]),
            n_points=int(a["npts"][o]),
            instance_id=None if iid < 0 else iid,
        )

    def resolve(self, target: str | int) -> int:
        """Index of the object named by ``target``: a memory object id, a category unique in memory,
        or (an int) the instance id it was tracked by. Unknown or ambiguous targets raise ``KeyError``
        listing the candidates."""
        if isinstance(target, (int, np.integer)) and not isinstance(target, bool):
            if int(target) in self._by_instance:
                return self._by_instance[int(target)]
            raise KeyError(
                f"no object with instance id {int(target)} in memory; instance ids: {sorted(self._by_instance)}"
            )
        if not isinstance(target, str):
            raise KeyError(f"an object target is an id, a category or an instance id, got {target!r}")
        o = self._by_id.get(target)
        if o is not None:
            while self.a["alias"][o] >= 0:
                o = int(self.a["alias"][o])
            return o
        ok = self.confirmed()
        same = [o for o in self._by_category.get(target, ()) if ok[o]]
        if same:
            if len(same) == 1:
                return same[0]
            raise KeyError(
                f"category {target!r} is ambiguous: {len(same)} objects in memory: "
                f"{[self.ids[i] for i in same]}; name one by id"
            )
        raise KeyError(f"no object {target!r} in memory; ids: {self.ids}; categories: {sorted(self._by_category)}")

    # ------------------------------------------------------------------------------------ creation
    def _grow(self, n: int) -> None:
        cap = len(self.a["npts"])
        if n <= cap:
            return
        grown = self._empty_arrays(max(n, 2 * cap, 8))
        for k, v in self.a.items():
            grown[k][:cap] = v
        self.a = grown

    def _new(self, category: str, step: int, instance_id: int | None) -> int:
        o = len(self.ids)
        self._grow(o + 1)
        k = self._suffix.get(category, 0) + 1
        self._suffix[category] = k
        oid = f"{category}_{k}"
        while oid in self._by_id:  # a category that itself ends in _<n>
            k += 1
            self._suffix[category] = k
            oid = f"{category}_{k}"
        self.ids.append(oid)
        self.categories.append(category)
        self.votes.append({})
        self._by_id[oid] = o
        self._by_category.setdefault(category, []).append(o)
        self.a["first_seen"][o] = step
        if instance_id is not None:
            self.a["instance_id"][o] = instance_id
            self._by_instance[instance_id] = o
        return o

    def _match(
        self, categories: list[str], centers: np.ndarray, samples: list[np.ndarray] | None = None
    ) -> list[int | None]:
        """Greedy one-to-one association by category and distance (nearest pairs first), within
        ``max(assoc_distance, half the object's diagonal, 0.35 x (its diagonal + the segment's))``. With
        the segments' ``samples``, a segment whose points lie largely (>= 30 %) inside an object's box
        (grown by ``assoc_distance`` / 3) joins it too, however far its centroid (a partial view of a
        large object)."""
        pairs = []
        alias = self.a["alias"]
        for s, (cat, c) in enumerate(zip(categories, centers)):
            seg = 0.0 if samples is None or len(samples[s]) < 2 else float(np.linalg.norm(np.ptp(samples[s], axis=0)))
            for o in self._by_category.get(cat, ()):
                if alias[o] >= 0:
                    continue
                d = float(np.linalg.norm(self.a["center"][o] - c))
                diag = float(np.linalg.norm(self.a["size"][o]))
                if d <= max(self.assoc_distance, 0.5 * diag, 0.35 * (diag + seg)):
                    pairs.append((d, s, o))
                elif samples is not None and self.a["npts"][o] >= 3:
                    a = self.a
                    inside = inside_box(samples[s], a["center"][o], a["size"][o], a["yaw"][o], self.assoc_distance / 3)
                    if inside >= 0.3:
                        pairs.append((d, s, o))
        out: list[int | None] = [None] * len(categories)
        used = set()
        for d, s, o in sorted(pairs):
            if out[s] is None and o not in used:
                out[s] = o
                used.add(o)
        return out

    # ------------------------------------------------------------------------------------ updates
    def observe_segments(
        self,
        step: int,
        instance_ids: list[int],
        categories: list[str],
        samples: list[np.ndarray],
        centroids: np.ndarray,
    ) -> np.ndarray:
        """Fuse one frame's instance segments (sample points in world); returns the object index of each."""
        if self.association == "instance":
            objs = [self._by_instance.get(i) for i in instance_ids]
        else:
            objs = self._match(categories, centroids, samples)
        out = np.empty(len(samples), dtype=np.int32)
        for s, (o, pts) in enumerate(zip(objs, samples)):
            if o is None:
                o = self._new(categories[s], step, instance_ids[s] if self.association == "instance" else None)
            self._add_points(o, pts)
            self._seen(o, step)
            self._vote(o, categories[s])
            self._dirty.add(o)
            out[s] = o
        return out

    def observe_box(
        self, step: int, category: str, center: np.ndarray, size: np.ndarray, R_world_box: np.ndarray
    ) -> int:
        """Fuse one detector box (world frame) into the object it matches by category and distance."""
        c, ext, yaw = gravity_aligned_box(center, size, R_world_box)
        o = self._match([category], c[None])[0]
        if o is None:
            o = self._new(category, step, None)
        a = self.a
        n = min(int(a["box_n"][o]), self.box_weight_max)
        if n == 0:
            a["box_center"][o], a["box_size"][o], a["box_yaw"][o] = c, ext, yaw
        else:
            # bring the new yaw within 45 degrees of the running one (a box turned by 90 degrees is the same box)
            turn = np.round((yaw - a["box_yaw"][o]) / (np.pi / 2))
            yaw -= turn * np.pi / 2
            if int(turn) % 2:
                ext = ext[[1, 0, 2]]
            w = 1.0 / (n + 1)
            a["box_center"][o] += w * (c - a["box_center"][o])
            a["box_size"][o] += w * (ext - a["box_size"][o])
            a["box_yaw"][o] = np.mod(a["box_yaw"][o] + w * (yaw - a["box_yaw"][o]), np.pi / 2)
        a["box_n"][o] += 1
        self._seen(o, step)
        self._vote(o, category)
        self._refit(o)
        return o

    def _seen(self, o: int, step: int) -> None:
        a = self.a
        a["n_obs"][o] += 1
        a["last_seen"][o] = max(int(a["last_seen"][o]), step)
        if a["n_obs"][o] == 1:
            a["first_seen"][o] = step

    def _add_points(self, o: int, pts: np.ndarray) -> None:
        """Reservoir sampling: every offered point has the same chance to be in the sample; a frame
        offers at most ``points_per_frame`` points (evenly spread over its segment)."""
        a, M = self.a, self.max_points
        if len(pts) > self.points_per_frame:
            pts = pts[np.linspace(0, len(pts) - 1, self.points_per_frame).astype(np.int64)]
        n, offered = int(a["npts"][o]), int(a["offered"][o])
        free = min(M - n, len(pts))
        a["points"][o, n : n + free] = pts[:free]
        a["npts"][o] = n + free
        rest = pts[free:]
        if len(rest):
            ranks = offered + free + np.arange(len(rest))
            j = (self.rng.random(len(rest)) * (ranks + 1)).astype(np.int64)
            keep = j < M
            a["points"][o, j[keep]] = rest[keep]
        a["offered"][o] = offered + len(pts)

    def _refit(self, o: int) -> None:
        a = self.a
        n = int(a["npts"][o])
        if n >= 3:
            a["center"][o], a["size"][o], a["yaw"][o] = fit_box(a["points"][o, :n])
        elif a["box_n"][o] > 0:
            a["center"][o], a["size"][o], a["yaw"][o] = a["box_center"][o], a["box_size"][o], a["box_yaw"][o]
        elif n > 0:
            a["center"][o] = a["points"][o, :n].mean(axis=0)

    def carve(
        self,
        T_cam_world: np.ndarray,
        K: np.ndarray,
        depth: np.ndarray,
        obj_img: np.ndarray | None,
        margin_abs: float,
        margin_rel: float,
    ) -> None:
        """Drop sample points the frame shows are gone (see :func:`._kernels.carve_object_points`)."""
        n_obj = len(self)
        if n_obj == 0:
            return
        a = self.a
        removed = np.zeros(n_obj, dtype=np.int64)
        before = a["npts"][:n_obj].copy()
        obj_img = np.zeros((0, 0), dtype=np.int32) if obj_img is None else obj_img
        okern.carve_object_points(
            a["points"],
            a["npts"],
            n_obj,
            T_cam_world,
            K[0, 0],
            K[1, 1],
            K[0, 2],
            K[1, 2],
            depth,
            obj_img,
            margin_abs,
            margin_rel,
            removed,
        )
        for o in np.flatnonzero(removed):
            # the survivors stay a uniform sample of what is still there
            a["offered"][o] = int(np.ceil(a["offered"][o] * a["npts"][o] / before[o]))
            self._dirty.add(int(o))

    def refit_dirty(self) -> None:
        dirty = sorted(self._dirty)
        for o in dirty:
            self._refit(o)
        self._dirty.clear()
        if self.merge:
            for o in dirty:
                if self.a["alias"][o] < 0:
                    self._consolidate(o)

    # ------------------------------------------------------------------------------------ state
    def copy(self) -> "ObjectRegistry":
        arrays, meta = self.state()
        return ObjectRegistry.from_state(self.config(), arrays, meta)

    def config(self) -> dict:
        return dict(
            association=self.association,
            max_points=self.max_points,
            points_per_frame=self.points_per_frame,
            assoc_distance=self.assoc_distance,
            box_weight_max=self.box_weight_max,
            min_support=self.min_support,
            min_observations=self.min_observations,
            merge=self.merge,
            detect_range=self.detect_range,
            detect_pixels=self.detect_pixels,
        )

    def state(self) -> tuple[dict[str, np.ndarray], dict]:
        n = len(self)
        arrays = {k: v[:n].copy() for k, v in self.a.items()}
        meta = {
            "ids": list(self.ids),
            "categories": list(self.categories),
            "suffix": dict(self._suffix),
            "rng": self.rng.bit_generator.state,
            "votes": [dict(v) for v in self.votes],
        }
        return arrays, meta

    @classmethod
    def from_state(cls, config: dict, arrays: dict[str, np.ndarray], meta: dict) -> "ObjectRegistry":
        reg = cls(**config)
        n = len(meta["ids"])
        if len(meta["categories"]) != n or len(set(meta["ids"])) != n:
            raise ValueError("object state: ids and categories must be equally long and ids unique")
        template = reg._empty_arrays(n)
        for k, t in template.items():
            if k not in arrays and k in ("chances", "alias"):  # files written before detector evidence
                continue
            if k not in arrays:
                raise ValueError(f"object state is missing the field {k!r}")
            v = np.asarray(arrays[k])
            if v.dtype != t.dtype or v.shape != t.shape:
                raise ValueError(
                    f"object field {k!r} has dtype {v.dtype} and shape {v.shape}; expected {t.dtype} {t.shape}"
                )
            t[...] = v
        if np.any(template["npts"] < 0) or np.any(template["npts"] > reg.max_points):
            raise ValueError("object state: point counts out of range")
        reg.a = template
        for o, (oid, cat) in enumerate(zip(meta["ids"], meta["categories"])):
            reg.ids.append(str(oid))
            reg.categories.append(str(cat))
            reg._by_id[str(oid)] = o
            reg._by_category.setdefault(str(cat), []).append(o)
            if template["instance_id"][o] >= 0:
                reg._by_instance[int(template["instance_id"][o])] = o
        reg.votes = [{str(c): int(k) for c, k in v.items()} for v in meta.get("votes", [{}] * n)]
        if len(reg.votes) != n:
            raise ValueError("object state: one category vote table per object expected")
        if np.any(template["alias"] >= n) or np.any(template["alias"] == np.arange(n)):
            raise ValueError("object state: merge aliases out of range")
        reg._suffix = {str(k): int(v) for k, v in meta["suffix"].items()}
        reg.rng.bit_generator.state = meta["rng"]
        return reg
