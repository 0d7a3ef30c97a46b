"""Privileged scene truth of a LIBERO scene: every object's name, category, pose and 3D box."""

from __future__ import annotations

import numpy as np

from ..base import Box, ObjectTruth, SceneTruth


def categories(parsed_problem: dict) -> dict[str, str]:
    """object name -> category, from the task's BDDL (objects and fixtures)."""
    out = {}
    for group in ("objects", "fixtures"):
        for category, names in parsed_problem.get(group, {}).items():
            for name in names:
                out[name] = category
    return out


def geom_box(model, data, geom_ids: list[int], body_id: int) -> Box:
    """Oriented box (in the frame of ``body_id``) enclosing the given geoms' local AABBs."""
    R_wb = data.xmat[body_id].reshape(3, 3)
    p_wb = data.xpos[body_id]
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    pts = []
    for g in geom_ids:
        aabb = model.geom_aabb[g]  # centre (3), half-size (3) in the geom frame
        corners_g = aabb[:3] + signs * aabb[3:]
        corners_w = corners_g @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g]
        pts.append((corners_w - p_wb) @ R_wb)  # in the body frame
    pts = np.concatenate(pts)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    center_b = (lo + hi) / 2
    return Box(center=p_wb + R_wb @ center_b, size=hi - lo, R=R_wb.copy())


def scene_truth(env) -> SceneTruth:
    """``env`` is libero's inner robosuite env (``ControlEnv.env``)."""
    model, data = env.sim.model._model, env.sim.data._data
    cats = categories(env.parsed_problem)
    instances = list(env.model.instances_to_ids.keys())
    objects = []
    for idx, name in enumerate(instances):
        if name not in cats:
            continue  # robot, mount, gripper
        geoms = env.model.instances_to_ids[name].get("geom", [])
        obj = env.objects_dict.get(name) or env.fixtures_dict.get(name)
        body_id = model.body(obj.root_body).id if obj is not None else model.geom_bodyid[geoms[0]]
        if not geoms:
            continue
        box = geom_box(model, data, geoms, body_id)
        objects.append(
            ObjectTruth(
                id=name,
                category=cats[name],
                position=data.xpos[body_id].copy(),
                R=data.xmat[body_id].reshape(3, 3).copy(),
                box=box,
                instance_id=idx + 1,
            )
        )
    T_world_agent = np.eye(4)
    base = model.body("robot0_base").id
    T_world_agent[:3, :3] = data.xmat[base].reshape(3, 3)
    T_world_agent[:3, 3] = data.xpos[base]
    xy = np.concatenate([o.box.corners()[:, :2] for o in objects] + [T_world_agent[None, :2, 3]])
    lo, hi = xy.min(axis=0) - 0.1, xy.max(axis=0) + 0.1
    return SceneTruth(objects=tuple(objects), bounds=(lo[0], lo[1], hi[0], hi[1]), T_world_agent=T_world_agent)
