"""``SimView``: the expert's narrow handle to the simulator.

Everything the skills read of the MuJoCo scene goes through here: poses of bodies and sites,
collision geometry (as the local bounding boxes of colliding geoms), downward and arbitrary ray
casts, finger contacts, the gripper's state, articulated joints, and LIBERO's own evaluation of a
BDDL predicate. Nothing here writes to the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from .geometry import SIGNS

FINGER_BODIES = {
    "gripper0_leftfinger": 0,
    "gripper0_finger_joint1_tip": 0,
    "gripper0_rightfinger": 1,
    "gripper0_finger_joint2_tip": 1,
}
_GROUPS = np.array([1, 1, 1, 0, 0, 0], dtype=np.uint8)  # geom groups a ray sees (collision geoms live in 0-2)


@dataclass
class Obstacles:
    """Colliding geoms near a point as oriented boxes (centres, rotations, half extents) and planes."""

    c: np.ndarray
    R: np.ndarray
    h: np.ndarray
    planes: list


class SimView:
    def __init__(self, env) -> None:
        se = env.sim_env
        self.se = se
        self.task_name = env.task.name
        self.model, self.data = se.sim.model._model, se.sim.data._data
        m = self.model
        self.grip_site = m.site("gripper0_grip_site").id
        base = m.body("robot0_base").id
        self.robot_root = int(m.body_rootid[base])
        self.base_xy = self.data.xpos[base][:2].copy()
        finger_bodies = {m.body(n).id: side for n, side in FINGER_BODIES.items()}
        self.finger_geoms = {
            g: finger_bodies[int(m.geom_bodyid[g])]
            for g in range(m.ngeom)
            if int(m.geom_bodyid[g]) in finger_bodies and self.collides(g)
        }
        self.finger_joints = [m.joint(n).id for n in ("gripper0_finger_joint1", "gripper0_finger_joint2")]
        self.wrist_joint = m.joint("robot0_joint7").id  # turns the hand about its approach axis

    # ------------------------------------------------------------------ names
    @property
    def goal(self) -> list[list[str]]:
        return [[str(x) for x in p] for p in self.se.parsed_problem["goal_state"]]

    def is_object(self, name: str) -> bool:
        return name in self.se.objects_dict

    def is_fixture(self, name: str) -> bool:
        return name in self.se.fixtures_dict

    def is_site(self, name: str) -> bool:
        return name in self.se.object_sites_dict

    def site_parent(self, name: str) -> str | None:
        return getattr(self.se.object_sites_dict[name], "parent_name", None)

    def joints_of(self, name: str) -> list[str]:
        """Joint names of an articulated site (a drawer's region) or fixture (a microwave, a stove)."""
        if self.is_site(name):
            return list(getattr(self.se.object_sites_dict[name], "joints", None) or [])
        obj = self.se.get_object(name)
        joints = list(getattr(obj, "joints", None) or [])
        kinds = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
        return [j for j in joints if self.model.jnt_type[self.joint_id(j)] in kinds]

    def holds(self, predicate: list[str]) -> bool:
        """LIBERO's own evaluation of one goal predicate (as its success check does)."""
        return bool(self.se._eval_predicate(predicate))

    def libero_object(self, name: str):
        return self.se.get_object(name)

    # ------------------------------------------------------------------ bodies, sites, joints
    def body(self, name: str) -> int:
        """Body id of a LIBERO object or fixture (its root body), or of a MuJoCo body by name."""
        if name in self.se.obj_body_id:
            return int(self.se.obj_body_id[name])
        return int(self.model.body(name).id)

    def root(self, body: int) -> int:
        return int(self.model.body_rootid[body])

    def body_pos(self, body: int) -> np.ndarray:
        return self.data.xpos[body].copy()

    def body_mat(self, body: int) -> np.ndarray:
        return self.data.xmat[body].reshape(3, 3).copy()

    def site_pos(self, name: str) -> np.ndarray:
        return self.data.site_xpos[self.model.site(name).id].copy()

    def site_mat(self, name: str) -> np.ndarray:
        return self.data.site_xmat[self.model.site(name).id].reshape(3, 3).copy()

    def joint_id(self, name: str) -> int:
        return int(self.model.joint(name).id)

    def qpos(self, joint: int) -> float:
        return float(self.data.qpos[self.model.jnt_qposadr[joint]])

    def joint_anchor(self, joint: int) -> tuple[np.ndarray, np.ndarray]:
        """World position and axis of a hinge or slide joint."""
        return self.data.xanchor[joint].copy(), self.data.xaxis[joint].copy()

    # ------------------------------------------------------------------ collision geometry
    def collides(self, g: int) -> bool:
        return bool(self.model.geom_contype[g] or self.model.geom_conaffinity[g])

    def colliding_geoms(self, root: int) -> np.ndarray:
        """Colliding geoms of every body under ``root`` (a root body id)."""
        m = self.model
        return np.array(
            [g for g in range(m.ngeom) if int(m.body_rootid[m.geom_bodyid[g]]) == root and self.collides(g)],
            dtype=np.int64,
        )

    def body_geoms(self, body: int) -> np.ndarray:
        """Colliding geoms of one body (not its children)."""
        m = self.model
        return np.array([g for g in range(m.ngeom) if int(m.geom_bodyid[g]) == body and self.collides(g)], np.int64)

    def corners(self, geoms) -> np.ndarray:
        """World corners (N*8 x 3) of the local AABBs of ``geoms``."""
        m, d = self.model, self.data
        pts = []
        for g in geoms:
            aabb = m.geom_aabb[g]
            c = aabb[:3] + SIGNS * aabb[3:]
            pts.append(c @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g])
        return np.concatenate(pts)

    def geom_box(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(centre, rotation, half extents) of a geom's local AABB in the world."""
        R = self.data.geom_xmat[g].reshape(3, 3).copy()
        aabb = self.model.geom_aabb[g]
        return self.data.geom_xpos[g] + R @ aabb[:3], R, aabb[3:].copy()

    def obstacles(self, center, skip_roots, radius: float = 0.3) -> Obstacles:
        """Colliding geoms within ``radius`` (horizontally) of ``center``, except the robot and
        ``skip_roots``, as oriented boxes (exact for boxes, conservative for meshes), and planes."""
        m, d = self.model, self.data
        skip = {self.robot_root, *skip_roots}
        boxes, planes = [], []
        for g in range(m.ngeom):
            if not self.collides(g) or int(m.body_rootid[m.geom_bodyid[g]]) in skip:
                continue
            R = d.geom_xmat[g].reshape(3, 3)
            if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE:
                planes.append((d.geom_xpos[g].copy(), R[:, 2].copy()))
                continue
            aabb = m.geom_aabb[g]
            c = d.geom_xpos[g] + R @ aabb[:3]
            if np.linalg.norm(c[:2] - center[:2]) - np.linalg.norm(aabb[3:]) > radius:
                continue
            boxes.append((c, R.copy(), aabb[3:].copy()))
        return Obstacles(
            c=np.array([b[0] for b in boxes]).reshape(-1, 3),
            R=np.array([b[1] for b in boxes]).reshape(-1, 3, 3),
            h=np.array([b[2] for b in boxes]).reshape(-1, 3),
            planes=planes,
        )

    # ------------------------------------------------------------------ ray casts
    def ray(self, p, direction, skip_roots=()) -> tuple[float, int]:
        """Distance and geom of the first colliding geom along a ray (robot and ``skip_roots``
        ignored); (inf, -1) when nothing is hit."""
        m, d = self.model, self.data
        skip = {self.robot_root, *skip_roots}
        gid = np.zeros(1, dtype=np.int32)
        p = np.asarray(p, dtype=np.float64).copy()
        u = np.asarray(direction, dtype=np.float64)
        u = u / np.linalg.norm(u)
        travelled = 0.0
        for _ in range(40):
            dist = mujoco.mj_ray(m, d, p, u, _GROUPS, 1, -1, gid)
            if dist < 0 or gid[0] < 0:
                return np.inf, -1
            g = int(gid[0])
            travelled += dist
            if self.collides(g) and int(m.body_rootid[m.geom_bodyid[g]]) not in skip:
                return travelled, g
            p = p + (dist + 1e-4) * u
            travelled += 1e-4
        return np.inf, -1

    def ray_down(self, x: float, y: float, z0: float = 3.0, skip_roots=()) -> float:
        """Height of the first colliding geom below (x, y, z0), ignoring the robot and ``skip_roots``."""
        m, d = self.model, self.data
        skip = {self.robot_root, *skip_roots}
        gid = np.zeros(1, dtype=np.int32)
        p = np.array([x, y, z0], dtype=np.float64)
        down = np.array([0.0, 0.0, -1.0])
        for _ in range(40):
            dist = mujoco.mj_ray(m, d, p, down, _GROUPS, 1, -1, gid)
            if dist < 0 or gid[0] < 0:
                return -np.inf
            g = int(gid[0])
            hit = p[2] - dist
            if self.collides(g) and int(m.body_rootid[m.geom_bodyid[g]]) not in skip:
                return hit
            p = np.array([x, y, hit - 1e-4])
        return -np.inf

    def corridor_top(self, p0, p1, radius: float, skip_roots=()) -> float:
        """Highest obstacle under the straight corridor of ``radius`` from ``p0`` to ``p1`` (xy)."""
        p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
        n = max(2, int(np.linalg.norm(p1 - p0) / 0.03) + 1)
        top = -np.inf
        offs = [np.zeros(2)] + [
            radius * np.array([np.cos(a), np.sin(a)]) for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)
        ]
        for s in np.linspace(0.0, 1.0, n):
            c = p0 + s * (p1 - p0)
            for o in offs:
                top = max(top, self.ray_down(c[0] + o[0], c[1] + o[1], skip_roots=skip_roots))
        return top

    def fastest_object(self) -> float:
        """The highest linear speed (m/s) of any freely moving object (0 when all are at rest)."""
        m, d = self.model, self.data
        free = np.nonzero(m.jnt_type == mujoco.mjtJoint.mjJNT_FREE)[0]
        speeds = [np.linalg.norm(d.qvel[m.jnt_dofadr[j] : m.jnt_dofadr[j] + 3]) for j in free]
        return float(max(speeds, default=0.0))

    # ------------------------------------------------------------------ the gripper
    def grip(self) -> tuple[np.ndarray, np.ndarray]:
        d = self.data
        return d.site_xpos[self.grip_site].copy(), d.site_xmat[self.grip_site].reshape(3, 3).copy()

    def wrist(self) -> tuple[float, float, float, np.ndarray]:
        """The last arm joint (it turns the hand about its approach axis): position, range, world axis."""
        j = self.wrist_joint
        lo, hi = (float(x) for x in self.model.jnt_range[j])
        return self.qpos(j), lo, hi, self.data.xaxis[j].copy()

    def finger_opening(self) -> float:
        """Sum of both finger joint positions (0 closed, 0.08 fully open)."""
        return float(sum(abs(self.qpos(j)) for j in self.finger_joints))

    def gripper_command(self) -> float:
        """The gripper's integrated command (+1 open .. -1 closed)."""
        return float(self.se.robots[0].gripper.current_action[0])

    def finger_contacts(self, geoms) -> set:
        """Which fingers (0, 1) touch any of ``geoms``."""
        d = self.data
        touching = set()
        objs = set(np.asarray(geoms).tolist())
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = int(c.geom1), int(c.geom2)
            if g1 in self.finger_geoms and g2 in objs:
                touching.add(self.finger_geoms[g1])
            elif g2 in self.finger_geoms and g1 in objs:
                touching.add(self.finger_geoms[g2])
        return touching

    def robot_contacts(self, geoms) -> bool:
        """Whether any robot geom touches any of ``geoms``."""
        m, d = self.model, self.data
        objs = set(np.asarray(geoms).tolist())
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = int(c.geom1), int(c.geom2)
            for a, b in ((g1, g2), (g2, g1)):
                if a in objs and int(m.body_rootid[m.geom_bodyid[b]]) == self.robot_root:
                    return True
        return False
