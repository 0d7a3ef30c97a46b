"""Read-only questions to a spatial memory, as plain data: what the server's ``map.*`` methods answer.

Every function takes a :class:`~spatial_memory.SpatialMemory` that nobody writes while it runs
(the server passes a ``snapshot()`` of the live memory) and returns JSON-able plain data:

* :func:`objects_table` -- every object with its box, egocentric direction and distance from the
  agent's latest pose, and its point on the top-down map's ``[0, 999]`` grid;
* :func:`query` -- one target, named by id, by category or by a question in words ("where is the
  black bowl?"), with what was asked for: ``direction`` (degrees, left positive), ``distance``
  (metres, horizontal), ``point`` (top-down ``[0, 999]`` grid), ``agent`` (its point, heading on
  the map and position);
* :func:`topdown_png` -- the map of one level as PNG bytes, with overlays;
* :func:`snapshot_npz` -- the whole memory in its own file format (``SpatialMemory.save``).

Conventions are docs/ARCHITECTURE.md §4's (the GST-Bench ones).
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Iterable

import cv2
import numpy as np

from spatial_memory import SpatialMemory
from spatial_memory.geometry import egocentric_bearing
from spatial_memory.topdown import LEVELS, TopDownFrame

QUERY_FIELDS = ("direction", "distance", "point", "agent")
_STOP = {
    "the",
    "a",
    "an",
    "is",
    "are",
    "where",
    "what",
    "which",
    "how",
    "far",
    "of",
    "to",
    "me",
    "my",
    "i",
    "from",
    "relative",
    "robot",
    "now",
    "it",
    "in",
    "on",
    "at",
    "show",
    "find",
    "direction",
    "distance",
    "away",
}


class NotFound(LookupError):
    """The memory has no such object (or nothing yet); the message lists what it has."""


def map_frame(
    mem: SpatialMemory, width: int = 640, height: int = 512, frame: str = "fit", extent_m: float = 8.0
) -> TopDownFrame:
    """The top-down frame answers refer to: everything seen (``fit``) or a window of ``extent_m``
    metres around the agent (``ego``), north-up, ``width`` x ``height`` pixels."""
    if mem.n_frames == 0:
        raise NotFound("the memory is empty: no frame has been fused yet")
    if frame == "ego":
        c = mem.agent_pose().position[:2]
        half = extent_m / 2
        sx, sy = (half * width / height, half) if width >= height else (half, half * height / width)
        return TopDownFrame(float(c[0] - sx), float(c[1] - sy), float(c[0] + sx), float(c[1] + sy), width, height)
    return mem.default_frame(width=width, height=height)


def frame_dict(frame: TopDownFrame) -> dict[str, Any]:
    return {
        "xmin": frame.xmin,
        "ymin": frame.ymin,
        "xmax": frame.xmax,
        "ymax": frame.ymax,
        "width": frame.width,
        "height": frame.height,
    }


def agent_state(mem: SpatialMemory, frame: TopDownFrame) -> dict[str, Any]:
    """Where the agent is: its point on the map grid, its heading on the map (0 = up, left
    positive) and its position and step in the memory's frame."""
    pose = mem.agent_pose()
    g = frame.world_to_grid(pose.position[:2])
    return {
        "point": [int(g[0]), int(g[1])],
        "heading_deg": round(float(pose.heading_deg), 2),
        "position": [round(float(x), 4) for x in pose.position],
        "step": int(pose.step),
    }


def _object_row(o, T_world_cam: np.ndarray, frame: TopDownFrame) -> dict[str, Any]:
    direction, distance = egocentric_bearing(T_world_cam, o.center)
    g = frame.world_to_grid(np.asarray(o.center[:2], dtype=np.float64))
    return {
        "id": o.id,
        "category": o.category,
        "direction_deg": round(float(direction), 2),
        "distance_m": round(float(distance), 3),
        "point": [int(g[0]), int(g[1])],
        "center": [round(float(x), 4) for x in o.center],
        "size": [round(float(x), 4) for x in o.size],
        "yaw_deg": round(float(np.degrees(o.yaw)), 2),
        "last_seen": int(o.last_seen),
    }


def objects_table(mem: SpatialMemory, frame: TopDownFrame | None = None) -> dict[str, Any]:
    """All objects, nearest first, with the agent and the map frame the points refer to."""
    if mem.n_frames == 0:
        return {"frames": 0, "objects": [], "agent": None, "frame": None}
    frame = frame or map_frame(mem)
    T = mem.agent_pose().T_world_cam
    rows = sorted((_object_row(o, T, frame) for o in mem.objects()), key=lambda r: r["distance_m"])
    return {"frames": int(mem.n_frames), "objects": rows, "agent": agent_state(mem, frame), "frame": frame_dict(frame)}


def _words(text: str) -> list[str]:
    out = []
    for w in re.findall(r"[a-z0-9]+", text.lower().replace("_", " ")):
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]  # "bowls" -> "bowl"
        out.append(w)
    return out


def match_target(mem: SpatialMemory, text: str) -> tuple[str, list[str]]:
    """The object a target or a question names: ``(id, other candidates' ids)``.

    An exact id or category wins; otherwise every category is scored by how many of its words the
    text contains (``"where is the black bowl?"`` matches ``akita_black_bowl``), ties going to the
    category whose words are most fully matched. Among several objects of the chosen category the
    nearest is answered and the others are listed. ``NotFound`` names what the memory has."""
    objs = mem.objects()
    cats = sorted({o.category for o in objs})
    if not objs:
        raise NotFound("the memory holds no object yet")
    by_id = {o.id: o for o in objs}
    if text in by_id:
        return text, []
    if text in cats:
        category = text
    else:
        asked = set(_words(text)) - _STOP
        best, best_key = None, (0, 0.0)
        for c in cats:
            cw = [w for w in _words(c) if not w.isdigit()]
            hits = sum(1 for w in set(cw) if w in asked)
            key = (hits, hits / max(1, len(set(cw))))
            if hits and key > best_key:
                best, best_key = c, key
        if best is None:
            raise NotFound(f"no object in memory matches {text!r}; it holds: {cats}")
        category = best
    same = [o for o in objs if o.category == category]
    T = mem.agent_pose().T_world_cam
    same.sort(key=lambda o: egocentric_bearing(T, o.center)[1])
    return same[0].id, [o.id for o in same[1:]]


def query(
    mem: SpatialMemory, target: str, what: Iterable[str] = QUERY_FIELDS, frame: TopDownFrame | None = None
) -> dict[str, Any]:
    """One object's answer (see the module doc); ``target`` is an id, a category or a question."""
    what = list(what)
    bad = sorted(set(what) - set(QUERY_FIELDS))
    if bad:
        raise ValueError(f"unknown query field(s) {bad}; choose from {list(QUERY_FIELDS)}")
    if mem.n_frames == 0:
        raise NotFound("the memory is empty: no frame has been fused yet")
    oid, others = match_target(mem, target)
    o = mem.object(oid)
    frame = frame or map_frame(mem)
    row = _object_row(o, mem.agent_pose().T_world_cam, frame)
    out: dict[str, Any] = {"target": target, "id": oid, "category": o.category, "frames": int(mem.n_frames)}
    if others:
        out["others"] = others
    if "direction" in what:
        out["direction_deg"] = row["direction_deg"]
    if "distance" in what:
        out["distance_m"] = row["distance_m"]
    if "point" in what:
        out["point"] = row["point"]
        out["frame"] = frame_dict(frame)
    if "agent" in what:
        out["agent"] = agent_state(mem, frame)
    out["text"] = answer_text(out)
    return out


def answer_text(ans: dict[str, Any]) -> str:
    """The answer in words: ``"akita_black_bowl_1: 35 deg left, 1.2 m away"``."""
    parts = []
    if "direction_deg" in ans:
        d = ans["direction_deg"]
        parts.append("straight ahead" if abs(d) < 0.5 else f"{abs(d):.0f} deg {'left' if d > 0 else 'right'}")
    if "distance_m" in ans:
        parts.append(f"{ans['distance_m']:.1f} m away")
    if "point" in ans:
        parts.append(f"at <point>{ans['point'][0]} {ans['point'][1]}</point> on the map")
    return f"{ans['id']}: " + ", ".join(parts) if parts else ans["id"]


def topdown_png(
    mem: SpatialMemory,
    level: str = "medium",
    width: int = 640,
    height: int = 512,
    *,
    trajectory: bool = True,
    agent: bool = True,
    objects: Iterable[str] = (),
    frame: str = "fit",
    extent_m: float = 8.0,
) -> tuple[bytes, dict[str, Any]]:
    """PNG bytes of the memory's map of ``level`` and the frame it is drawn on."""
    if level not in LEVELS:
        raise ValueError(f"unknown top-down level {level!r}; expected one of {list(LEVELS)}")
    tf = map_frame(mem, width, height, frame, extent_m)
    marks = [match_target(mem, t)[0] for t in objects]
    img = mem.topdown(level, tf, trajectory=trajectory, agent=agent, objects=marks)
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(img[:, :, ::-1]))
    if not ok:
        raise RuntimeError("PNG encoding failed")
    return buf.tobytes(), frame_dict(tf)


def snapshot_npz(mem: SpatialMemory) -> bytes:
    """The memory in its own ``.npz`` format (load with ``SpatialMemory.load``)."""
    fd, path = tempfile.mkstemp(suffix=".npz", prefix="memory-")
    os.close(fd)
    try:
        written = mem.save(path)
        with open(written, "rb") as f:
            return f.read()
    finally:
        for p in {path, str(path)}:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
