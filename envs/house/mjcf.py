"""An apartment (:class:`HouseSpec`) as a MuJoCo model.

Geom groups (the renderer picks them per view):

* 0 floors and walls, 1 furniture and objects, 2 the white ground outside the apartment,
* 3 the ceiling — shown in ego views, left out of the top-down view.

All geoms are static, visual only (no contacts: the agent is kinematic and collides against the
navigable grid). The agent is a mocap body carrying the ego camera; a fixed orthographic camera
looks straight down on the scene's :class:`TopDownFrame`. ``geom_instance[g]`` maps each geom to
its item's instance id (0 for structure: floors, walls, ceiling, ground).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from spatial_memory.topdown import TopDownFrame

from .catalog import MESHES, WALL_HEIGHT, libero_assets_dir
from .meshes import mesh_xml_arrays
from .spec import HouseSpec

GROUP_STRUCTURE, GROUP_ITEMS, GROUP_GROUND, GROUP_CEILING = 0, 1, 2, 3
EXTENT = 10.0  # model.stat.extent: the renderer's clip planes are znear/zfar times this
ZNEAR, ZFAR = 0.005, 6.0  # -> 0.05 m .. 60 m
TOPDOWN_HEIGHT = WALL_HEIGHT + 1.0
MAX_ROOM_LIGHTS = 7  # + the headlight = the 8 lights OpenGL renders


def yaw_quat(yaw: float) -> np.ndarray:
    """MuJoCo quaternion (w, x, y, z) of a rotation about z."""
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def mujoco_cam_xyaxes(pitch_deg: float) -> tuple[float, ...]:
    """``xyaxes`` of a MuJoCo camera (looks along its -z, y up) in the base frame, matching
    :func:`envs.ground_nav.agent.T_base_cam`."""
    p = math.radians(pitch_deg)
    return (0.0, -1.0, 0.0, math.sin(p), 0.0, math.cos(p))


@dataclass(frozen=True)
class CameraSpec:
    width: int = 256
    height: int = 256
    fovy: float = 90.0
    mount_height: float = 1.5
    pitch_deg: float = 0.0


@dataclass(eq=False)
class CompiledHouse:
    model: mujoco.MjModel
    geom_instance: np.ndarray  # int32 [ngeom]
    geom_group: np.ndarray  # int [ngeom]
    ego_cam: int
    topdown_cam: int
    agent_mocap: int
    xml: str


def _f(*v: float) -> str:
    return " ".join(f"{x:.6g}" for x in v)


def _quat_z(yaw: float) -> tuple[float, float, float, float]:
    return (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))


def _rot(yaw: float, p: tuple[float, float, float]) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([c * p[0] - s * p[1], s * p[0] + c * p[1], p[2]])


def build_xml(spec: HouseSpec, camera: CameraSpec, topdown: TopDownFrame, use_meshes: bool = True) -> str:
    assets_dir = libero_assets_dir() if use_meshes else None
    materials: dict[tuple, str] = {}

    def mat(rgba) -> str:
        key = tuple(round(float(v), 4) for v in rgba)
        if key not in materials:
            materials[key] = f"mat{len(materials)}"
        return materials[key]

    meshes: list[str] = []
    mesh_names: dict[tuple, str] = {}
    geoms: list[str] = []
    W, H = spec.size
    # ground (outside, white and unlit so the top-down background is white)
    geoms.append(
        f'<geom name="ground" type="box" size="{_f(W + 50, H + 50, 0.01)}" pos="{_f(W / 2, H / 2, -0.06)}" '
        f'material="ground" group="{GROUP_GROUND}"/>'
    )
    for k, room in enumerate(spec.rooms):
        x0, y0, x1, y1 = room.rect
        geoms.append(
            f'<geom name="floor_{k}" type="box" size="{_f((x1 - x0) / 2, (y1 - y0) / 2, 0.01)}" '
            f'pos="{_f((x0 + x1) / 2, (y0 + y1) / 2, -0.01)}" '
            f'material="{mat(room.floor_rgba)}" group="{GROUP_STRUCTURE}"/>'
        )
        geoms.append(
            f'<geom name="ceiling_{k}" type="box" size="{_f((x1 - x0) / 2 + 0.06, (y1 - y0) / 2 + 0.06, 0.02)}" '
            f'pos="{_f((x0 + x1) / 2, (y0 + y1) / 2, WALL_HEIGHT + 0.02)}" material="ceiling" group="{GROUP_CEILING}"/>'
        )
    for k, w in enumerate(spec.walls):
        geoms.append(
            f'<geom name="wall_{k}" type="box" size="{_f(*(np.array(w.size) / 2))}" pos="{_f(*w.center)}" '
            f'material="{mat(spec.wall_rgba)}" group="{GROUP_STRUCTURE}"/>'
        )
    for it in spec.items:
        P = np.array(it.position)
        for j, part in enumerate(it.parts):
            name = f"i{it.instance_id}_{j}"
            m = mat(part.rgba)
            if part.shape == "mesh":
                if assets_dir is None:  # meshes unavailable: the part's box stands in
                    pos = P + _rot(it.yaw, part.pos)
                    geoms.append(
                        f'<geom name="{name}" type="box" size="{_f(*part.size)}" pos="{_f(*pos)}" '
                        f'quat="{_f(*_quat_z(it.yaw))}" material="{m}" group="{GROUP_ITEMS}"/>'
                    )
                    continue
                g = MESHES[part.mesh]
                lo, hi = np.array(g.lo), np.array(g.hi)
                yaw_n = math.radians(g.yaw_deg)
                swap = int(round(g.yaw_deg / 90.0)) % 2 == 1
                ext = hi - lo
                ext_c = np.array([ext[1], ext[0], ext[2]]) if swap else ext
                s_c = 2 * np.array(part.size) / ext_c
                s_n = np.array([s_c[1], s_c[0], s_c[2]]) if swap else s_c
                c_c = _rot(yaw_n, tuple(s_n * (lo + hi) / 2))
                pos = P + _rot(it.yaw, tuple(np.array(part.pos) - c_c))
                q = _f(*_quat_z(it.yaw + yaw_n))
                key = (part.mesh, tuple(round(float(x), 5) for x in s_n))
                if key not in mesh_names:
                    mesh_names[key] = f"mesh{len(mesh_names)}"
                    verts, faces = mesh_xml_arrays(part.mesh, key[1])
                    meshes.append(f'<mesh name="{mesh_names[key]}" vertex="{verts}" face="{faces}"/>')
                geoms.append(
                    f'<geom name="{name}" type="mesh" mesh="{mesh_names[key]}" pos="{_f(*pos)}" quat="{q}" '
                    f'material="{m}" group="{GROUP_ITEMS}"/>'
                )
                continue
            pos = P + _rot(it.yaw, part.pos)
            geoms.append(
                f'<geom name="{name}" type="{part.shape}" size="{_f(*part.size)}" pos="{_f(*pos)}" '
                f'quat="{_f(*_quat_z(it.yaw))}" material="{m}" group="{GROUP_ITEMS}"/>'
            )
    lights = []
    # OpenGL's fixed pipeline lights 8 sources (the headlight is one): the 7 largest rooms get a lamp
    lit = sorted(range(len(spec.rooms)), key=lambda k: -spec.rooms[k].area)[:MAX_ROOM_LIGHTS]
    for k in sorted(lit):
        room = spec.rooms[k]
        c = room.center
        lights.append(
            f'<light name="light_{k}" pos="{_f(c[0], c[1], WALL_HEIGHT - 0.05)}" dir="0 0 -1" directional="false" '
            'castshadow="false" diffuse="0.26 0.26 0.25" specular="0 0 0" attenuation="1 0 0" '
            'cutoff="85" exponent="1"/>'
        )
    x0, y0, x1, y1 = topdown.bounds
    mat_xml = "".join(
        f'<material name="{n}" rgba="{_f(*k)}" specular="0.05" shininess="0.1" reflectance="0"/>'
        for k, n in materials.items()
    )
    offw = max(camera.width, topdown.width)
    offh = max(camera.height, topdown.height)
    topdown_cam = (
        f'<camera name="topdown" mode="fixed" projection="orthographic" fovy="{_f(y1 - y0)}" '
        f'pos="{_f((x0 + x1) / 2, (y0 + y1) / 2, TOPDOWN_HEIGHT)}" quat="1 0 0 0"/>'
    )
    ego_cam = (
        f'<camera name="ego" mode="fixed" fovy="{camera.fovy}" pos="{_f(0, 0, camera.mount_height)}" '
        f'xyaxes="{_f(*mujoco_cam_xyaxes(camera.pitch_deg))}"/>'
    )
    return f"""<mujoco model="house_{spec.seed}">
  <compiler angle="radian" autolimits="true"/>
  <statistic extent="{EXTENT}" center="{_f(W / 2, H / 2, 1)}"/>
  <visual>
    <global offwidth="{offw}" offheight="{offh}" fovy="{camera.fovy}"/>
    <quality shadowsize="0" offsamples="0" numslices="12" numstacks="6" numquads="1"/>
    <headlight ambient="0.4 0.4 0.4" diffuse="0.36 0.36 0.36" specular="0 0 0"/>
    <map znear="{ZNEAR}" zfar="{ZFAR}"/>
  </visual>
  <default><geom contype="0" conaffinity="0"/></default>
  <asset>
    <material name="ground" rgba="1 1 1 1" emission="1" specular="0" shininess="0"/>
    <material name="ceiling" rgba="0.96 0.96 0.95 1" emission="0.35" specular="0" shininess="0"/>
    {mat_xml}
    {"".join(meshes)}
  </asset>
  <worldbody>
    {"".join(geoms)}
    {"".join(lights)}
    {topdown_cam}
    <body name="agent" mocap="true" pos="{_f(W / 2, H / 2, 0)}">
      {ego_cam}
    </body>
  </worldbody>
</mujoco>"""


def compile_house(spec: HouseSpec, camera: CameraSpec, topdown: TopDownFrame, use_meshes: bool = True) -> CompiledHouse:
    xml = build_xml(spec, camera, topdown, use_meshes)
    model = mujoco.MjModel.from_xml_string(xml)
    geom_instance = np.zeros(model.ngeom, dtype=np.int32)
    for g in range(model.ngeom):
        name = model.geom(g).name
        if name.startswith("i"):
            geom_instance[g] = int(name[1:].split("_", 1)[0])
    return CompiledHouse(
        model=model,
        geom_instance=geom_instance,
        geom_group=np.array(model.geom_group, dtype=np.int64),
        ego_cam=mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, "ego"),
        topdown_cam=mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, "topdown"),
        agent_mocap=int(model.body_mocapid[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "agent")]),
        xml=xml,
    )
