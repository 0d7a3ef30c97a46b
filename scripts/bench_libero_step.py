#!/usr/bin/env python
"""Where a rendered LIBERO control step's time goes, for the project's three workloads (docs/BENCHMARKS.md,
"What a LIBERO step costs").

* ``record``: the scripted expert recording demonstrations, agentview + wrist RGB at 256 px (the proofs'
  setting: ``env.depth=false env.segmentation=false``); every frame is kept.
* ``policy``: a learned policy's evaluation with the same cameras; a chunk of 8 played open loop reads one
  observation in 8 (``reads``), though every step renders today.
* ``memory``: the spatial memory / GST streams, both cameras with depth and instance masks at 256 px.
* ``map_policy``: libero_mem's map arm: ``memory``'s cameras, the policy asked one step in 8 (both
  cameras), its memory fusing the agentview camera at every step (``between``: the cameras read between
  the policy's requests).

For the workloads whose steps are not all read, the step is also timed as rendered on demand
(``env.render_next`` with the workload's pattern: ``env_step_on_demand``).

For each, on libero_object task 0 (official init state 0, a fixed seeded action sequence), per control
step: the whole ``LiberoEnv.step`` as it is; the physics alone (robosuite's step with the camera
observables off: the controller's substeps and the other observables); each camera's render passes
through robosuite (RGB or RGB + depth, then the separate segmentation pass) split into MuJoCo's scene
update, the rasterisation and the buffer read; robosuite's Python mapping of segment ids to instances;
our wrapper's own work (orientation, depth to metres, ``CameraFrame``); shadows on and off; and the
faces llvmpipe transforms per render; a reset; and (``memory``) what bounds a render (:func:`probes`).
The rasterisation is timed with the buffer read that waits for it (llvmpipe returns from the draw
call before it has finished). ``--lp-threads 1,2`` repeats the
render timing in a fresh process per value of ``LP_NUM_THREADS`` (llvmpipe reads it when the GL context
is created). Minimum and median over ``--steps`` steps; compare ratios within one run (the machines
here are shared).

    .venv/bin/python scripts/bench_libero_step.py --steps 20 --lp-threads 1,2 --out runs/bench_libero_step.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

WORKLOADS = {
    "record": {"depth": False, "segmentation": False, "reads": 1},
    "policy": {"depth": False, "segmentation": False, "reads": 8},
    "memory": {"depth": True, "segmentation": True, "reads": 1},
    "map_policy": {"depth": True, "segmentation": True, "reads": 8, "between": ["agentview"]},
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="libero_object")
    p.add_argument("--task", type=int, default=0)
    p.add_argument("--resolution", type=int, default=256)
    p.add_argument("--steps", type=int, default=20, help="control steps timed per workload")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {list(WORKLOADS)}")
    p.add_argument("--lp-threads", default="", help="comma-separated LP_NUM_THREADS values to time renders at")
    p.add_argument("--renders-only", action="store_true", help=argparse.SUPPRESS)  # the per-LP_NUM_THREADS child
    p.add_argument("--out", default=None, help="JSON file for the numbers")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    a = build_parser().parse_args(argv)
    bad = [w for w in a.workloads.split(",") if w not in WORKLOADS]
    if bad:
        build_parser().error(f"unknown workload(s) {bad}; choose from {list(WORKLOADS)}")
    if a.steps < 2:
        build_parser().error("--steps must be >= 2")
    return a


def _stats(xs: list[float]) -> dict[str, float]:
    ms = np.asarray(xs) * 1000.0
    return {"min_ms": round(float(ms.min()), 2), "median_ms": round(float(np.median(ms)), 2)}


def _timed(fn, n: int) -> dict[str, float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return _stats(out)


def _actions(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    a = rng.uniform(-0.3, 0.3, (n, 7))
    a[:, 6] = -1.0
    return a


def _env(a, workload: str):
    from envs.libero.env import LiberoEnv

    w = WORKLOADS[workload]
    return LiberoEnv(
        a.suite,
        a.task,
        cameras=("agentview", "wrist"),
        resolution=a.resolution,
        depth=w["depth"],
        segmentation=w["segmentation"],
    )


def _camera_observables(env) -> list:
    return [o for o in env._env.env._observables.values() if o.modality == "image" and o.is_enabled()]


def _faces(sim, ctx) -> dict[str, int]:
    """Faces of the meshes in the last rendered scene, and of all its geoms by group."""
    import mujoco

    model = sim.model._model
    faces, by_group = 0, {}
    for i in range(ctx.scn.ngeom):
        g = ctx.scn.geoms[i]
        if g.objtype != mujoco.mjtObj.mjOBJ_GEOM:
            continue
        gid = g.objid
        if model.geom_type[gid] != mujoco.mjtGeom.mjGEOM_MESH:
            continue
        n = int(model.mesh_facenum[model.geom_dataid[gid]])
        faces += n
        grp = int(model.geom_group[gid])
        by_group[grp] = by_group.get(grp, 0) + n
    return {"mesh_faces": faces, "by_group": {str(k): v for k, v in sorted(by_group.items())}}


def renders(env, a, workload: str) -> dict:
    """Each camera's passes on the current state: robosuite's calls, then MuJoCo's three stages."""
    import mujoco

    from envs.libero.env import CAMERAS

    w = WORKLOADS[workload]
    sim = env._env.sim
    ctx = sim._render_context_offscreen
    res = a.resolution
    out: dict = {}
    for cam in ("agentview", "wrist"):
        name = CAMERAS[cam]
        cid = sim.model.camera_name2id(name)
        r = {
            "robosuite_rgb" + ("_depth" if w["depth"] else ""): _timed(
                lambda: sim.render(camera_name=name, width=res, height=res, depth=w["depth"]), a.steps
            )
        }
        if w["segmentation"]:
            r["robosuite_segmentation"] = _timed(
                lambda: sim.render(camera_name=name, width=res, height=res, segmentation=True), a.steps
            )
            seg = sim.render(camera_name=name, width=res, height=res, segmentation=True)
            inner = env._env.env
            name2id = {inst: i for i, inst in enumerate(list(inner.model.instances_to_ids.keys()))}
            mapping = {idn: name2id[inst] for idn, inst in inner.model.geom_ids_to_instances.items()}
            flat = seg[::-1, :, 1].flatten()
            r["segmentation_id_mapping_python"] = _timed(
                lambda: np.fromiter(map(lambda x: mapping.get(x, -1), flat), dtype=np.int32), a.steps
            )
            from envs.libero.segmentation import instance_lut, map_ids

            lut, ids = instance_lut(inner), seg[::-1, :, 1]
            r["segmentation_id_mapping_lut"] = _timed(lambda: map_ids(ids, lut), a.steps)
        ctx.cam.type, ctx.cam.fixedcamid = mujoco.mjtCamera.mjCAMERA_FIXED, cid
        viewport = mujoco.MjrRect(0, 0, res, res)
        m, d = sim.model._model, sim.data._data
        update = lambda: mujoco.mjv_updateScene(m, d, ctx.vopt, ctx.pert, ctx.cam, mujoco.mjtCatBit.mjCAT_ALL, ctx.scn)  # noqa: E731
        r["mjv_updateScene"] = _timed(update, a.steps)
        update()
        rgb = np.empty((res, res, 3), np.uint8)
        depth = np.empty((res, res), np.float32) if w["depth"] else None

        def draw_and_read() -> None:  # the read waits for the rasteriser: the pair is the render's cost
            mujoco.mjr_render(viewport, ctx.scn, ctx.con)
            mujoco.mjr_readPixels(rgb, depth, viewport, ctx.con)

        r["mjr_render_and_readPixels"] = _timed(draw_and_read, a.steps)
        r["mjr_readPixels_alone"] = _timed(lambda: mujoco.mjr_readPixels(rgb, depth, viewport, ctx.con), a.steps)
        shadow = ctx.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW]
        ctx.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 1 - shadow
        r["mjr_render_and_readPixels_shadows_" + ("off" if shadow else "on")] = _timed(draw_and_read, a.steps)
        ctx.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = shadow
        r["scene"] = {"geoms": int(ctx.scn.ngeom), **_faces(sim, ctx)}
        out[cam] = r
    out["lights_casting_shadows"] = int(np.sum(sim.model._model.light_castshadow))
    return out


def probes(env, a) -> dict:
    """What bounds a render (each camera, RGB + depth): the same render at 64 px; with the mesh
    geoms hidden; with every geom hidden; with every material's reflectance 0; with only the geoms whose
    bounding spheres meet the camera's frustum widened by 10 % (and whether that image is identical);
    and the scene's meshes (faces, and how many lie on meshes with texture coordinates)."""
    import mujoco

    from envs.libero.env import CAMERAS

    sim = env._env.sim
    ctx, m, d = sim._render_context_offscreen, sim.model._model, sim.data._data

    def render(res: int, hide=None) -> tuple[np.ndarray, float]:
        mujoco.mjv_updateScene(m, d, ctx.vopt, ctx.pert, ctx.cam, mujoco.mjtCatBit.mjCAT_ALL, ctx.scn)
        if hide is not None:
            for i in range(ctx.scn.ngeom):
                if hide(ctx.scn.geoms[i]):
                    ctx.scn.geoms[i].type = mujoco.mjtGeom.mjGEOM_NONE
        vp, rgb = mujoco.MjrRect(0, 0, res, res), np.empty((res, res, 3), np.uint8)
        t = time.perf_counter()
        mujoco.mjr_render(vp, ctx.scn, ctx.con)
        mujoco.mjr_readPixels(rgb, np.empty((res, res), np.float32), vp, ctx.con)
        return rgb, time.perf_counter() - t

    def timed(res: int, hide=None) -> dict[str, float]:
        return _stats([render(res, hide)[1] for _ in range(a.steps)])

    def off_frustum(g) -> bool:  # the sphere lies wholly outside one side of the widened pyramid
        cam = ctx.scn.camera[0]
        pos, fwd, up = np.array(cam.pos), np.array(cam.forward), np.array(cam.up)
        right = np.cross(fwd, up)
        half = 1.1 * max(abs(cam.frustum_top), abs(cam.frustum_bottom)) / cam.frustum_near
        r = m.geom_rbound[g.objid] if g.objtype == mujoco.mjtObj.mjOBJ_GEOM else np.inf
        c = np.array(g.pos) - pos
        z = c @ fwd
        return any(c @ ax - half * z > r * np.hypot(1, half) for ax in (up, -up, right, -right))

    res, out = a.resolution, {}
    for name in ("agentview", "wrist"):
        ctx.cam.type, ctx.cam.fixedcamid = mujoco.mjtCamera.mjCAMERA_FIXED, m.camera(CAMERAS[name]).id
        o = out[name] = {"render_ms": timed(res), "render_64px_ms": timed(64)}
        o["meshes_hidden_ms"] = timed(res, lambda g: g.type == mujoco.mjtGeom.mjGEOM_MESH)
        o["all_hidden_ms"] = timed(res, lambda g: True)
        kept = m.mat_reflectance.copy()
        m.mat_reflectance[:] = 0
        o["no_reflectance_ms"] = timed(res)
        m.mat_reflectance[:] = kept
        full, culled = render(res)[0], render(res, off_frustum)[0]
        o["frustum_culled_ms"] = timed(res, off_frustum)
        o["frustum_culled_identical"] = bool(np.array_equal(full, culled))
        mujoco.mjv_updateScene(m, d, ctx.vopt, ctx.pert, ctx.cam, mujoco.mjtCatBit.mjCAT_ALL, ctx.scn)
        inside = sum(not off_frustum(ctx.scn.geoms[i]) for i in range(ctx.scn.ngeom))
        o["geoms_in_frustum"] = [int(inside), int(ctx.scn.ngeom)]
    faces = m.mesh_facenum.astype(int)
    out["meshes"] = {
        "n": int(m.nmesh),
        "faces": int(faces.sum()),
        "faces_textured": int(faces[m.mesh_texcoordnum > 0].sum()),
    }
    return out


def workload_step(a, workload: str) -> dict:
    env = _env(a, workload)
    try:
        env.reset(options={"trial": 0})
        acts = _actions(a.steps)
        inner = env._env
        sim = inner.sim
        res: dict = {"workload": workload, **WORKLOADS[workload]}
        rob = inner.env
        res["substeps_per_control_step"] = int(round(1.0 / rob.control_freq / sim.model.opt.timestep))
        # the step as it is today: every camera rendered
        t = []
        for act in acts:
            t0 = time.perf_counter()
            env.step(act)
            t.append(time.perf_counter() - t0)
        res["env_step"] = _stats(t)
        w = WORKLOADS[workload]
        if w["reads"] > 1:  # rendered on demand: every camera when the policy is asked, `between` otherwise
            t = []
            for k, act in enumerate(acts):
                env.render_next(True if k % w["reads"] == 0 else w.get("between", False))
                t0 = time.perf_counter()
                env.step(act)
                t.append(time.perf_counter() - t0)
            res["env_step_on_demand"] = _stats(t)
        # physics and the other observables: the camera observables off, as the settling steps run
        cams = _camera_observables(env)
        for o in cams:
            o.set_enabled(False)
        try:
            res["physics_and_proprio"] = _timed(lambda: inner.step(acts[0] * 0.0), a.steps)
        finally:
            for o in cams:
                o.set_enabled(True)
        # robosuite's whole observation (every camera, every pass), and our wrapper on top of it
        res["robosuite_observations"] = _timed(lambda: rob._get_observations(force_update=True), a.steps)
        env._raw = rob._get_observations(force_update=True)
        res["our_wrapper"] = _timed(env._observation, a.steps)
        res["renders"] = renders(env, a, workload)
        # a new episode's reset (after the first: the env is built by then), and the render contexts it built
        kept = getattr(env, "_keep_context", None)
        t = []
        for k in range(1, 4):
            t0 = time.perf_counter()
            env.reset(options={"trial": k})
            t.append(time.perf_counter() - t0)
        res["reset"] = {**_stats(t), "render_contexts_kept": None if kept is None else kept.reused}
        if workload == "memory":
            res["probes"] = probes(env, a)
        med = res["env_step"]["median_ms"]
        phys = res["physics_and_proprio"]["median_ms"]
        res["render_share_of_step"] = round(1.0 - phys / med, 3) if med else None
        # what a step costs if only the observations read are rendered (the physics every step)
        res["estimated_step_if_rendered_on_read_ms"] = round(phys + (med - phys) / WORKLOADS[workload]["reads"], 2)
        return res
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from envs import _gl  # noqa: F401  (headless GL before MuJoCo)

    out: dict = {"suite": a.suite, "task": a.task, "resolution": a.resolution, "steps": a.steps}
    out["LP_NUM_THREADS"] = os.environ.get("LP_NUM_THREADS")
    out["cpu_count"] = os.cpu_count()
    out["load_before"] = os.getloadavg()
    workloads = a.workloads.split(",")
    if a.renders_only:
        env = _env(a, workloads[0])
        try:
            env.reset(options={"trial": 0})
            out["renders"] = renders(env, a, workloads[0])
        finally:
            env.close()
        print(json.dumps(out))
        return 0
    out["workloads"] = {}
    for w in workloads:
        out["workloads"][w] = r = workload_step(a, w)
        print(
            f"{w}: env.step {r['env_step']['median_ms']:.0f} ms (median), "
            f"physics {r['physics_and_proprio']['median_ms']:.0f} ms, "
            f"rendering {100 * r['render_share_of_step']:.0f} %; rendered only when read: "
            f"{r['estimated_step_if_rendered_on_read_ms']:.0f} ms",
            file=sys.stderr,
        )
    if a.lp_threads:
        out["lp_threads"] = {}
        for n in a.lp_threads.split(","):
            cmd = [sys.executable, __file__, "--renders-only", "--workloads", workloads[-1], "--steps", str(a.steps)]
            cmd += ["--suite", a.suite, "--task", str(a.task), "--resolution", str(a.resolution)]
            r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LP_NUM_THREADS": n.strip()})
            if r.returncode != 0:
                raise SystemExit(f"LP_NUM_THREADS={n}: {r.stderr[-2000:]}")
            out["lp_threads"][n.strip()] = json.loads(r.stdout.strip().splitlines()[-1])["renders"]
    out["load_after"] = os.getloadavg()
    text = json.dumps(out, indent=2)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
