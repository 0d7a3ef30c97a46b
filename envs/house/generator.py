"""Seeded procedural apartments: rooms, walls with doors, furniture, small objects.

``generate_house(seed, params)`` is a pure function of its arguments (one ``numpy`` generator
seeded with ``seed``; no global state), so a seed always gives the same apartment. Steps:

1. footprint W x H (each side in [min_side_m, max_side_m]), split by binary space partitioning
   into 4-8 rectangular rooms of at least 2.6 m per side; sometimes a corner room is dropped
   (L-shaped apartments);
2. room types by size (largest = living room, smallest = bathroom, ...);
3. doors: a random spanning tree of the rooms that share enough wall (so every room is
   reachable) plus a few extra doors that make loops; walls are the room boundaries minus the
   door gaps;
4. furniture per room type (against walls, in corners, in the centre, or related to another piece:
   chairs around the table, nightstands beside the bed), kept clear of doors; pieces are dropped
   again until the free space of every room is connected for an agent of ``agent_radius``;
5. 10-30 small objects on the furniture that has a top to hold them: most categories appear once
   (unique semantic targets), some two or three times (distractors).

World frame: x east, y north, z up, metres; the apartment covers [0, W] x [0, H]; floor at z = 0,
ceiling at ``WALL_HEIGHT``.
"""

from __future__ import annotations

import numpy as np

from . import catalog
from .furnish import Placed, furnish_room, place_objects, rooms_reachable
from .layout import (
    connected,
    door_edges,
    drop_corner_room,
    make_doors,
    make_walls,
    name_rooms,
    room_types,
    snap,
    split_footprint,
)
from .spec import GenParams, HouseSpec, ItemSpec, RoomSpec

__all__ = ["GenParams", "HouseSpec", "generate_house"]


def generate_house(seed: int, params: GenParams | None = None) -> HouseSpec:
    """The apartment of ``seed`` (deterministic for a given seed and params)."""
    params = params or GenParams()
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"scene seed must be a non-negative int, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    for _attempt in range(20):
        W = snap(float(rng.uniform(params.min_side_m, params.max_side_m)), 0.1)
        H = snap(float(rng.uniform(params.min_side_m, params.max_side_m)), 0.1)
        n = int(rng.integers(params.min_rooms, params.max_rooms + 1))
        rects = split_footprint(rng, W, H, n)
        if len(rects) < params.min_rooms or not connected(
            len(rects), [(i, j) for i, j, _ in door_edges(rects, params.door_width[1])]
        ):
            continue
        rects = drop_corner_room(rng, rects, W, H, params.min_rooms, params.door_width[1])
        break
    else:
        raise ValueError(
            f"cannot lay out {params.min_rooms}-{params.max_rooms} rooms "
            f"in a {params.min_side_m}-{params.max_side_m} m footprint"
        )
    types = room_types(rng, rects)
    names = name_rooms(types)
    rooms = [
        RoomSpec(nm, t, r, catalog.FLOOR_COLOURS[t][int(rng.integers(len(catalog.FLOOR_COLOURS[t])))])
        for nm, t, r in zip(names, types, rects)
    ]
    doors = make_doors(rng, rects, types, names, params.door_width)
    walls = make_walls(rects, doors)
    bounds = (0.0, 0.0, W, H)

    furniture: list[Placed] = []
    for room in rooms:
        furniture += furnish_room(rng, room, doors)
    # drop furniture (optional pieces first, latest first) until every room is reachable
    while not rooms_reachable(rooms, walls, furniture, params, bounds):
        if not furniture:
            raise ValueError(f"apartment {seed}: rooms cannot be connected for agent_radius={params.agent_radius}")
        optional = [k for k, p in enumerate(furniture) if not p.required]
        furniture.pop(optional[-1] if optional else len(furniture) - 1)

    supports = [(k, p) for k, p in enumerate(furniture) if p.kind.support]
    n_obj = int(rng.integers(params.min_objects, params.max_objects + 1))
    objects = place_objects(rng, supports, n_obj, {r.name: r.type for r in rooms})

    # ids: furniture first, then objects; "<category>_<k>" counts within the category
    items: list[ItemSpec] = []
    counter: dict[str, int] = {}
    fid: dict[int, str] = {}

    def new_id(category: str) -> str:
        counter[category] = counter.get(category, 0) + 1
        return f"{category}_{counter[category]}"

    for k, p in enumerate(furniture):
        iid = new_id(p.kind.category)
        fid[k] = iid
        items.append(
            ItemSpec(
                iid,
                p.kind.category,
                len(items) + 1,
                "furniture",
                p.room,
                (p.x, p.y, 0.0),
                p.yaw,
                p.size,
                tuple(p.kind.parts(*p.size, params.use_meshes)),
                None,
                p.kind.support,
            )
        )
    for p, k in objects:
        items.append(
            ItemSpec(
                new_id(p.kind.category),
                p.kind.category,
                len(items) + 1,
                "object",
                p.room,
                (p.x, p.y, p.z),
                p.yaw,
                p.size,
                tuple(p.kind.parts(*p.size, params.use_meshes)),
                fid[k],
                False,
            )
        )
    wall_rgba = catalog.WALL_COLOURS[int(rng.integers(len(catalog.WALL_COLOURS)))]
    return HouseSpec(int(seed), params, (W, H), tuple(rooms), tuple(doors), tuple(walls), tuple(items), wall_rgba)
