"""envs/house: config, seed splits, apartment generation (no rendering)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from envs.house.catalog import FURNITURE, OBJECTS, WALL_THICKNESS
from envs.house.config import SPLITS, HouseConfig, split_of, split_seeds
from envs.house.family import HouseFamily
from envs.house.generator import GenParams, generate_house

SEEDS = [0, 7, 900000, 900001, 900002, 800003]


def fingerprint(spec) -> str:
    h = hashlib.sha256()
    h.update(
        repr(
            (spec.size, [(r.name, r.rect) for r in spec.rooms], [(d.rooms, d.center, d.width) for d in spec.doors])
        ).encode()
    )
    h.update(repr([(w.center, w.size) for w in spec.walls]).encode())
    h.update(
        repr([(i.id, i.category, i.instance_id, i.position, i.yaw, i.size, i.support) for i in spec.items]).encode()
    )
    return h.hexdigest()


@pytest.fixture(scope="module")
def specs():
    return {s: generate_house(s) for s in SEEDS}


def test_same_seed_same_apartment(specs):
    for s in SEEDS[:3]:
        assert fingerprint(generate_house(s)) == fingerprint(specs[s])


def test_different_seeds_differ(specs):
    assert len({fingerprint(sp) for sp in specs.values()}) == len(SEEDS)


def test_footprint_rooms_and_counts(specs):
    p = GenParams()
    for spec in specs.values():
        W, H = spec.size
        assert p.min_side_m - 1e-9 <= W <= p.max_side_m + 1e-9 and p.min_side_m - 1e-9 <= H <= p.max_side_m + 1e-9
        assert p.min_rooms <= len(spec.rooms) <= p.max_rooms
        assert len({r.name for r in spec.rooms}) == len(spec.rooms)
        area = sum(r.area for r in spec.rooms)
        assert area <= W * H + 1e-6
        # rooms tile (part of) the footprint without overlapping
        for i, a in enumerate(spec.rooms):
            for b in spec.rooms[i + 1 :]:
                ox = min(a.rect[2], b.rect[2]) - max(a.rect[0], b.rect[0])
                oy = min(a.rect[3], b.rect[3]) - max(a.rect[1], b.rect[1])
                assert ox <= 1e-9 or oy <= 1e-9, (a.name, b.name)
        assert p.min_objects <= len(spec.objects) <= p.max_objects
        assert {r.type for r in spec.rooms} >= {"living_room", "bathroom"}


def test_every_room_reachable_through_doors(specs):
    for spec in specs.values():
        names = [r.name for r in spec.rooms]
        parent = {n: n for n in names}

        def find(n):
            while parent[n] != n:
                n = parent[n]
            return n

        for d in spec.doors:
            assert d.width >= 0.9 - 1e-9
            parent[find(d.rooms[0])] = find(d.rooms[1])
        assert len({find(n) for n in names}) == 1


def test_every_room_reachable_on_the_grid(specs):
    """Independent of the generator's own check: flood fill from one room reaches free cells in all rooms."""
    from scipy import ndimage

    for spec in specs.values():
        grid = spec.navgrid()
        labels, n = ndimage.label(grid.free, structure=np.ones((3, 3)))
        sizes = np.bincount(labels.ravel())
        sizes[0] = 0
        main = labels == np.argmax(sizes)
        for r in spec.rooms:
            x0, y0, x1, y1 = r.interior()
            xs = np.arange(x0, x1, 0.05)
            ys = np.arange(y0, y1, 0.05)
            xy = np.stack(np.meshgrid(xs, ys), -1).reshape(-1, 2)
            rc = grid.world_to_cell(xy)
            assert main[rc[:, 0], rc[:, 1]].sum() * 0.05 * 0.05 >= 1.0, f"seed {spec.seed}: room {r.name} not reachable"


def test_door_gaps_are_open_and_walls_close_the_rest(specs):
    for spec in specs.values():
        walls = [w.box() for w in spec.walls]
        for d in spec.doors:
            p = np.array([d.center[0], d.center[1], 1.0])
            assert not any(b.contains(p[None])[0] for b in walls), f"door {d.rooms} is walled up"
        # the outer boundary (away from the corners) is walled
        W, H = spec.size
        for x, y in [(W / 2, 0.0), (0.0, H / 2), (W / 2, H), (W, H / 2)]:
            p = np.array([[x, y, 1.0]])
            inside_room = spec.room_at(np.array([x, y])) is not None
            if inside_room:
                assert any(b.contains(p)[0] for b in walls), (spec.seed, x, y)


def test_items_inside_rooms_and_not_overlapping(specs):
    for spec in specs.values():
        furn = spec.furniture
        for it in furn:
            x0, y0, x1, y1 = it.rect()
            r = spec.room(it.room).interior()
            assert x0 >= r[0] - 1e-6 and y0 >= r[1] - 1e-6 and x1 <= r[2] + 1e-6 and y1 <= r[3] + 1e-6, it.id
            assert abs(math.remainder(it.yaw, math.pi / 2)) < 1e-9
        for i, a in enumerate(furn):
            for b in furn[i + 1 :]:
                ra, rb = a.rect(), b.rect()
                assert min(ra[2], rb[2]) - max(ra[0], rb[0]) <= 1e-9 or min(ra[3], rb[3]) - max(ra[1], rb[1]) <= 1e-9, (
                    a.id,
                    b.id,
                )
        for ob in spec.objects:
            sup = spec.item(ob.support)
            assert sup.is_support
            assert abs(ob.position[2] - sup.top) < 1e-9  # stands on its support's top
            rs, ro = sup.rect(), ob.rect()
            assert (
                ro[0] >= rs[0] - 1e-9 and ro[1] >= rs[1] - 1e-9 and ro[2] <= rs[2] + 1e-9 and ro[3] <= rs[3] + 1e-9
            ), ob.id


def test_parts_inside_item_boxes(specs):
    """Every primitive part lies inside its item's box (so the box encloses everything visible)."""
    for spec in specs.values():
        for it in spec.items:
            dx, dy, dz = it.size
            for p in it.parts:
                if p.shape == "box" or p.shape == "mesh":
                    half = np.array(p.size)
                elif p.shape == "cylinder":
                    half = np.array([p.size[0], p.size[0], p.size[1]])
                else:
                    half = np.array([p.size[0]] * 3)
                lo, hi = np.array(p.pos) - half, np.array(p.pos) + half
                assert np.all(lo >= np.array([-dx / 2, -dy / 2, 0]) - 1e-6) and np.all(
                    hi <= np.array([dx / 2, dy / 2, dz]) + 1e-6
                ), (it.id, p)


def test_unique_targets_and_distractors(specs):
    for spec in specs.values():
        counts = spec.category_counts()
        assert len(spec.unique_categories()) >= 8
        assert any(n >= 2 for n in counts.values()), "no duplicate category (distractor)"
        ids = [it.id for it in spec.items]
        assert len(set(ids)) == len(ids)
        assert [it.instance_id for it in spec.items] == list(range(1, len(spec.items) + 1))
        assert set(counts) <= set(FURNITURE) | set(OBJECTS)


def test_walls_are_thin_axis_aligned_boxes(specs):
    for spec in specs.values():
        for w in spec.walls:
            assert min(w.size[0], w.size[1]) == pytest.approx(WALL_THICKNESS)


def test_meshes_do_not_change_the_layout():
    a, b = generate_house(5, GenParams(use_meshes=True)), generate_house(5, GenParams(use_meshes=False))
    assert [(i.id, i.position, i.size) for i in a.items] == [(i.id, i.position, i.size) for i in b.items]
    assert any(p.shape == "mesh" for i in a.items for p in i.parts)
    assert not any(p.shape == "mesh" for i in b.items for p in i.parts)


def test_generator_rejects_bad_seed():
    with pytest.raises(ValueError, match="non-negative"):
        generate_house(-1)


# --- config and splits -------------------------------------------------------------------


def test_splits_are_disjoint_and_documented():
    ranges = sorted(SPLITS.values())
    for (a0, a1), (b0, b1) in zip(ranges, ranges[1:]):
        assert a1 <= b0
    assert (
        split_of(0) == "train"
        and split_of(800_000) == "val"
        and split_of(900_999) == "test"
        and split_of(850_000) is None
    )
    assert split_seeds("test", 3) == [900_000, 900_001, 900_002]
    with pytest.raises(ValueError, match="unknown split"):
        split_seeds("dev", 1)


def test_config_rejects_unknown_and_bad_values():
    with pytest.raises(ValueError, match=r"unknown house env option\(s\) \['colour'\]; valid options: \[.*'split'"):
        HouseConfig.from_dict({"colour": 1})
    for bad, msg in [
        ({"split": "dev"}, "split"),
        ({"agent_radius": 0.6}, "agent_radius"),
        ({"min_rooms": 6, "max_rooms": 5}, "min_rooms"),
        ({"max_rooms": 12, "min_side_m": 8.0}, "max_rooms"),
        ({"width": 0}, "width"),
        ({"seed": -3}, "seed"),
        ({"success_radius_m": 0.3}, "success_radius_m"),
        ({"num_trials": True}, "num_trials"),
        ({"camera_fovy": "wide"}, "camera_fovy must be float"),
        ({"use_meshes": "yes"}, "use_meshes must be bool"),
        ({"max_forward_m": float("nan")}, "max_forward_m"),
    ]:
        with pytest.raises(ValueError, match=msg):
            HouseConfig.from_dict(bad)


def test_config_field_kinds_are_complete():
    from envs.house.config import _KINDS

    assert set(_KINDS) == set(HouseConfig().to_dict())


def test_family_tasks():
    fam = HouseFamily()
    tasks = fam.tasks({"split": "val", "num_scenes": 3, "num_trials": 4})
    assert [t.name for t in tasks] == ["house_800000", "house_800001", "house_800002"]
    assert all(t.num_trials == 4 and t.max_steps == 300 for t in tasks)
    one = fam.tasks({"seed": 3})
    assert len(one) == 1 and one[0].name == "house_3"
    with pytest.raises(ValueError, match="unknown house env option"):
        fam.tasks({"suite": "x"})
    with pytest.raises(ValueError, match="task_id"):
        fam.make({"seed": 3}, 1)


def test_registry_knows_house():
    from envs.registry import list_tasks

    assert list_tasks({"name": "house", "seed": 12})[0].name == "house_12"
