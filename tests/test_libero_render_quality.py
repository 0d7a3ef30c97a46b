"""``env.render_quality=fast`` (envs/libero/render_quality.py): the decimation keeps a mesh's shape and each
face's texture coordinates; the fast copy draws from the simulator's own poses (with nothing decimated
its frames are the default's, bit for bit, across a hard reset); with the meshes decimated the images
are close but not equal, and the simulator never notices (its states are the default's, bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.libero import render_quality as rq


def _sphere(n: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """A UV sphere: n x n quads, two triangles each."""
    th, ph = np.meshgrid(
        np.linspace(0.05, np.pi - 0.05, n), np.linspace(0, 2 * np.pi, n, endpoint=False), indexing="ij"
    )
    vert = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(n - 1), np.arange(n), indexing="ij")
    a, b = i * n + j, i * n + (j + 1) % n
    c, d = a + n, b + n
    face = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([b, d, c], -1).reshape(-1, 3)])
    return vert, face


def test_decimate_reaches_the_fraction_keeps_the_shape_and_each_face_s_origin():
    vert, face = _sphere()
    new_vert, new_face, origin = rq.decimate(vert, face, 0.2, min_faces=10)
    assert abs(len(new_face) - 0.2 * len(face)) <= 0.05 * len(face)
    assert new_face.min() >= 0 and new_face.max() == len(new_vert) - 1  # every vertex used, none dangling
    assert len(np.unique(np.sort(new_face, 1), axis=0)) == len(new_face)  # no degenerate or repeated face
    assert np.all(np.abs(np.linalg.norm(new_vert, axis=1) - 1.0) < 0.1)  # still the unit sphere
    # a new face comes from its origin face: each corner moved at most a cell's diagonal
    moved = np.linalg.norm(new_vert[new_face] - vert[face[origin]], axis=-1)
    assert moved.max() < 0.5 and np.median(moved) < 0.1
    again = rq.decimate(vert, face, 0.2, min_faces=10)
    assert all(np.array_equal(x, y) for x, y in zip((new_vert, new_face, origin), again))  # deterministic


def test_decimate_leaves_small_meshes_and_fraction_one_whole_and_rejects_bad_fractions():
    vert, face = _sphere(10)
    for kwargs in ({"fraction": 0.2, "min_faces": len(face) + 1}, {"fraction": 1.0, "min_faces": 10}):
        v, f, o = rq.decimate(vert, face, **kwargs)
        assert np.array_equal(v, vert) and np.array_equal(f, face) and np.array_equal(o, np.arange(len(face)))
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="fraction"):
            rq.decimate(vert, face, bad)


def test_render_quality_is_checked_and_enters_a_run_s_identity_only_when_fast():
    from envs.libero.config import LiberoConfig
    from envs.libero.family import LiberoFamily

    with pytest.raises(ValueError, match="render_quality"):
        LiberoConfig(render_quality="ultra")
    assert "render_quality" not in LiberoFamily().resolve({"name": "libero"})  # old runs still resume
    assert LiberoFamily().resolve({"name": "libero", "render_quality": "fast"})["render_quality"] == "fast"


def _run(env, plan):
    frames, states = [], []
    for trial, steps in plan:
        env.reset(options={"trial": trial})
        for act in np.random.default_rng(trial).uniform(-0.4, 0.4, (steps, 7)):
            obs = env.step(act)[0]
            frames.append({c: (f.rgb.copy(), f.depth.copy(), f.instance.copy()) for c, f in obs.cameras.items()})
            states.append(env.sim_env.sim.get_state().flatten().copy())
    return frames, states


def test_fast_copy_draws_the_simulator_s_poses_and_never_touches_its_physics(monkeypatch):
    from envs.libero.env import LiberoEnv

    cfg = {"cameras": ("agentview", "wrist"), "resolution": 64, "depth": True, "segmentation": True}
    plan = ((0, 5), (1, 3))  # the second trial's hard reset attaches the copy to a new simulator
    runs = {}
    for name, quality, min_faces in (
        ("default", "default", rq.MIN_FACES),
        ("whole", "fast", 10**9),
        ("fast", "fast", rq.MIN_FACES),
    ):
        monkeypatch.setattr(rq, "MIN_FACES", min_faces)
        env = LiberoEnv("libero_object", 0, init_states="sampled", render_quality=quality, **cfg)
        try:
            runs[name] = _run(env, plan)
            assert env.env_spec.info.get("render_quality", "default") == quality  # recordings say which
            if quality == "fast":
                assert env._keep_context.fast.builds == 1  # one copy for the env's life
        finally:
            env.close()
    ref_frames, ref_states = runs["default"]
    for name in ("whole", "fast"):
        assert all(np.array_equal(a, b) for a, b in zip(ref_states, runs[name][1])), f"{name}: the physics changed"
    # nothing decimated: the copy's frames are the simulator's, bit for bit (poses, cameras, groups, depth range)
    for k, (a, b) in enumerate(zip(ref_frames, runs["whole"][0])):
        for cam in a:
            for x, y, what in zip(a[cam], b[cam], ("rgb", "depth", "instance")):
                assert np.array_equal(x, y), f"step {k} {cam}.{what}"
    # decimated: close, not equal
    for a, b in zip(ref_frames, runs["fast"][0]):
        for cam in a:
            mse = np.mean((a[cam][0].astype(float) - b[cam][0].astype(float)) ** 2)
            assert 0 < mse and 10 * np.log10(255**2 / mse) > 20, cam
            assert np.mean(a[cam][2] == b[cam][2]) > 0.9, cam  # the same instances, a few edge pixels apart
            ok = np.isfinite(a[cam][1]) & np.isfinite(b[cam][1])
            assert np.median(np.abs(a[cam][1][ok] - b[cam][1][ok])) < 1e-3, cam
