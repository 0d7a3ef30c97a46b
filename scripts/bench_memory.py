"""Benchmark of the spatial memory (issue 3, docs/BENCHMARKS.md): prints JSON.

    .venv/bin/python scripts/bench_memory.py                 # integration, memory, queries, Open3D
    .venv/bin/python scripts/bench_memory.py --quick         # fewer frames (a smoke run)
    .venv/bin/python scripts/bench_memory.py --noise         # error vs perception noise (docs/MEMORY.md)
    .venv/bin/python scripts/bench_memory.py --perception    # integrate under the realistic/harsh profiles,
                                                             # with drift correction, vs Open3D on the same frames
    .venv/bin/python scripts/bench_memory.py --stages        # where integrate's time goes, per profile

Everything runs on one core (the process is pinned to one CPU and every thread pool is set to 1
before numpy, numba or Open3D load). Frames are rendered once by the synthetic apartment's ray
caster (:mod:`spatial_memory.synthetic`) and then fed to the memory and, in the same run, to
Open3D's C++ ``ScalableTSDFVolume`` and its tensor ``VoxelBlockGrid`` (when open3d is importable:
``pip install open3d``; on Debian it needs ``libusb-1.0-0``). Timings are medians of per-frame
process CPU time (robust to other load on a shared machine) with wall-clock medians beside them;
ratios are taken within the run.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spatial_memory import SpatialMemory, TopDownFrame  # noqa: E402
from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera  # noqa: E402


def timed(fn, *args) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn(*args)
    return (time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3


def summary(samples: list[tuple[float, float]]) -> dict:
    wall = np.array([s[0] for s in samples])
    cpu = np.array([s[1] for s in samples])
    return {
        "median_ms": round(float(np.median(cpu)), 3),
        "mean_ms": round(float(cpu.mean()), 3),
        "p90_ms": round(float(np.percentile(cpu, 90)), 3),
        "wall_median_ms": round(float(np.median(wall)), 3),
        "n": len(samples),
    }


def render(n_frames: int, size: int):
    scene = apartment_scene()
    K = default_camera(size, size)
    return scene, [scene.render(T, K, size, size, step=i) for i, T in enumerate(apartment_tour(n_frames))]


def bench_memory(frames, voxel: float, **config) -> dict:
    mem = SpatialMemory(voxel, **config)
    for f in frames[:3]:  # compile / load the numba cache outside the timing
        mem.integrate(f)
    mem = SpatialMemory(voxel, **config)
    first = [timed(mem.integrate, f) for f in frames]
    again = [timed(mem.integrate, f) for f in frames]  # revisits: the same views again
    return {
        "first_pass": summary(first),
        "revisit": summary(again),
        "voxels": len(mem.voxels),
        "objects": len(mem.objects()),
    }


def bench_perception(n: int, voxel: float, with_open3d: bool) -> dict:
    """Per-frame cost of ``integrate`` at 256x256 on the frames of each perception profile, with the memory
    settings of that profile (detector mode, drift correction), and Open3D's ScalableTSDFVolume on the very
    same (noisy) frames in the same run. The sensor simulation itself is not timed."""
    from envs.perception import categories
    from spatial_memory.profiles import PROFILES, memory_config_for

    _, frames = render(n, 256)
    out: dict = {}
    for name in ("gt", "realistic", "harsh"):
        stream = PROFILES[name].stream(("bench", name), categories("house"))
        noisy = [stream(f) for f in frames]
        cfg = memory_config_for(name)
        row = {"memory": bench_memory(noisy, voxel, config=cfg)}
        if name != "gt":
            row["memory_without_drift_correction"] = bench_memory(noisy, voxel, config=replace(cfg, drift=None))
            mem = SpatialMemory(config=cfg)
            for f in noisy:  # where the drift-corrected integrate spends its time
                mem.integrate(f)
            drift = [timed(mem.drift.correct, f.depth, f.K, f.T_world_cam) for f in noisy]
            row["drift_correct_alone"] = summary(drift)
        if with_open3d:
            o3 = bench_open3d(noisy, voxel, tensor=False)
            row["open3d"] = o3
            if "ScalableTSDFVolume" in o3:
                t = o3["ScalableTSDFVolume"]["median_ms"]
                row["ratio_ours_over_ScalableTSDFVolume"] = round(row["memory"]["first_pass"]["median_ms"] / t, 2)
        out[name] = row
    return out


def bench_stages(n: int, voxel: float) -> dict:
    """CPU time per frame of each stage of ``integrate`` (256x256, the memory settings of each profile):
    the memory's own steps are wrapped with a timer on the instance (nothing else changes)."""
    from envs.perception import categories
    from spatial_memory.profiles import PROFILES, memory_config_for

    _, frames = render(n, 256)
    out: dict = {}
    for name in ("gt", "realistic", "harsh"):
        stream = PROFILES[name].stream(("bench", name), categories("house"))
        noisy = [stream(f) for f in frames]
        cfg = memory_config_for(name)
        warm = SpatialMemory(voxel, config=cfg)
        for f in noisy[:3]:
            warm.integrate(f)
        mem = SpatialMemory(voxel, config=cfg)
        spent: dict[str, float] = {}

        def wrap(owner, attr: str, label: str) -> None:
            fn = getattr(owner, attr)

            def timed_call(*a, **k):
                c = time.process_time()
                try:
                    return fn(*a, **k)
                finally:
                    spent[label] = spent.get(label, 0.0) + time.process_time() - c

            setattr(owner, attr, timed_call)

        if mem.drift is not None:
            wrap(mem.drift, "correct", "drift correction")
        for attr, label in (
            ("_instance_slots", "instance slots"),
            ("_backproject", "back-projection"),
            ("_observe_objects", "objects: segments and association"),
            ("_object_image", "object image"),
        ):
            wrap(mem, attr, label)
        for attr, label in (
            ("carve", "objects: carving samples"),
            ("count_chances", "objects: detection chances"),
            ("refit_dirty", "objects: box refits and merging"),
        ):
            wrap(mem.registry, attr, label)
        wrap(mem.voxels, "carve", "voxels: carving")
        wrap(mem.voxels, "integrate", "voxels: fusion")
        total = [timed(mem.integrate, f) for f in noisy]
        out[name] = {
            "integrate": summary(total),
            "stages_mean_ms": {
                k: round(v / len(noisy) * 1e3, 3) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])
            },
        }
    return out


def bench_open3d(frames, voxel: float, tensor: bool = True) -> dict:
    try:
        import open3d as o3d
        import open3d.core as o3c
    except Exception as exc:  # not installed, or a missing system library
        return {"skipped": f"open3d not importable: {exc}"}
    f0 = frames[0]
    H, W = f0.depth.shape
    K = f0.K
    intr = o3d.camera.PinholeCameraIntrinsic(W, H, K[0, 0], K[1, 1], K[0, 2], K[1, 2])
    depth_max = 20.0
    legacy = [
        (
            o3d.geometry.RGBDImage.create_from_color_and_depth(
                o3d.geometry.Image(np.ascontiguousarray(f.rgb)),
                o3d.geometry.Image(np.ascontiguousarray(f.depth)),
                depth_scale=1.0,
                depth_trunc=depth_max,
                convert_rgb_to_intensity=False,
            ),
            np.linalg.inv(f.T_world_cam),
        )
        for f in frames
    ]
    out = {"open3d_version": o3d.__version__}

    vol = o3d.pipelines.integration.ScalableTSDFVolume(
        voxel_length=voxel, sdf_trunc=3 * voxel, color_type=o3d.pipelines.integration.TSDFVolumeColorType.RGB8
    )
    vol.integrate(*[legacy[0][0], intr, legacy[0][1]])
    vol = o3d.pipelines.integration.ScalableTSDFVolume(
        voxel_length=voxel, sdf_trunc=3 * voxel, color_type=o3d.pipelines.integration.TSDFVolumeColorType.RGB8
    )
    out["ScalableTSDFVolume"] = summary([timed(vol.integrate, rgbd, intr, ext) for rgbd, ext in legacy])
    if not tensor:
        return out

    dev = o3c.Device("CPU:0")
    intr_t = o3c.Tensor(K, o3c.float64)
    tens = [
        (
            o3d.t.geometry.Image(o3c.Tensor(np.ascontiguousarray(f.depth))),
            o3d.t.geometry.Image(o3c.Tensor(np.ascontiguousarray(f.rgb.astype(np.float32) / 255.0))),
            o3c.Tensor(np.linalg.inv(f.T_world_cam), o3c.float64),
        )
        for f in frames
    ]

    def make_vbg():
        return o3d.t.geometry.VoxelBlockGrid(
            attr_names=("tsdf", "weight", "color"),
            attr_dtypes=(o3c.float32, o3c.float32, o3c.float32),
            attr_channels=((1), (1), (3)),
            voxel_size=voxel,
            block_resolution=16,
            block_count=4000,
            device=dev,
        )

    def vbg_integrate(vbg, depth, color, ext):
        blocks = vbg.compute_unique_block_coordinates(depth, intr_t, ext, 1.0, depth_max)
        vbg.integrate(blocks, depth, color, intr_t, ext, 1.0, depth_max)

    vbg = make_vbg()
    vbg_integrate(vbg, *tens[0])
    vbg = make_vbg()
    out["VoxelBlockGrid"] = summary([timed(vbg_integrate, vbg, *t) for t in tens])
    return out


def bench_queries(mem: SpatialMemory, frame: TopDownFrame) -> dict:
    target = mem.objects()[0].category
    T = mem.agent_pose().T_world_cam

    def rep(fn, n=2000):
        w = time.perf_counter()
        for _ in range(n):
            fn()
        return round((time.perf_counter() - w) / n * 1e3, 5)

    out = {
        "egocentric_ms": rep(lambda: mem.egocentric(target)),
        "egocentric_from_pose_ms": rep(lambda: mem.egocentric(target, T)),
        "agent_pose_ms": rep(mem.agent_pose),
        "object_ms": rep(lambda: mem.object(target)),
        "map_point_ms": rep(lambda: mem.map_point(target, frame)),
        "objects_ms": rep(mem.objects, 200),
    }
    for level in ("easy", "medium", "hard"):
        out[f"topdown_{level}_ms"] = rep(lambda level=level: mem.topdown(level, frame, trajectory=True, agent=True), 5)
    out["snapshot_ms"] = rep(mem.snapshot, 5)
    with tempfile.TemporaryDirectory() as d:
        out["save_ms"] = rep(lambda: mem.save(Path(d) / "m.npz"), 3)
        out["file_mb"] = round((Path(d) / "m.npz").stat().st_size / 1e6, 2)
        out["load_ms"] = rep(lambda: SpatialMemory.load(Path(d) / "m.npz"), 3)
    return out


def bench_long_run(frames, voxel: float, total: int) -> dict:
    """``total`` integrations cycling through the tour: structure bytes and process peak RSS."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    mem = SpatialMemory(voxel)
    sizes = []
    for k in range(total):
        mem.integrate(frames[k % len(frames)])
        if (k + 1) % len(frames) == 0:
            sizes.append(len(mem.voxels))
    structure = mem.voxels.nbytes + sum(v.nbytes for v in mem.registry.a.values()) + mem._traj_T.nbytes
    return {
        "frames": total,
        "distinct_views": len(frames),
        "voxels_after_each_pass": sizes,
        "memory_structure_mb": round(structure / 1e6, 2),
        "process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "process_peak_rss_growth_mb": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024, 1),
        "memory": mem,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer frames")
    ap.add_argument("--noise", action="store_true", help="error vs perception noise instead of speed")
    ap.add_argument("--voxel", type=float, default=0.05)
    ap.add_argument("--no-open3d", action="store_true")
    ap.add_argument("--perception", action="store_true", help="integrate under the perception profiles")
    ap.add_argument("--stages", action="store_true", help="where integrate's time goes, per perception profile")
    args = ap.parse_args()

    if args.stages:
        n = 20 if args.quick else 60
        res = {"voxel_size_m": args.voxel, "cpu": "one core (pinned)", "frames": n, "size": "256x256"}
        res["profiles"] = bench_stages(n, args.voxel)
        print(json.dumps(res, indent=1))
        return

    if args.perception:
        n = 20 if args.quick else 60
        res = {"voxel_size_m": args.voxel, "cpu": "one core (pinned)", "frames": n, "size": "256x256"}
        res["profiles"] = bench_perception(n, args.voxel, not args.no_open3d)
        print(json.dumps(res, indent=1))
        return

    if args.noise:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from noise_sweep import sweep

        rows = sweep(
            n_frames=28 if args.quick else 56, size=64 if args.quick else 96, seeds=(0,) if args.quick else (0, 1, 2)
        )
        print(
            json.dumps(
                {
                    "noise_sweep": [
                        {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in rows
                    ]
                },
                indent=1,
            )
        )
        return

    n = 20 if args.quick else 60
    result: dict = {"voxel_size_m": args.voxel, "cpu": "one core (pinned)", "frames_per_size": n}
    # the long run first, so that its peak RSS is the memory's and not Open3D's
    _, frames = render(n, 256)
    long = bench_long_run(frames, args.voxel, 200 if args.quick else 1000)
    mem = long.pop("memory")
    result["long_run_256"] = long
    result["queries"] = bench_queries(mem, TopDownFrame(-0.5, -0.5, 10.5, 8.5))
    result["integrate"], result["open3d"] = {}, {}
    for size in (128, 256, 512):
        _, frames = render(n if size < 512 else max(n // 3, 10), size)
        result["integrate"][f"{size}x{size}"] = bench_memory(frames, args.voxel)
        if size == 256:
            result["integrate"]["256x256_pixel_stride_2"] = bench_memory(frames, args.voxel, pixel_stride=2)
        if not args.no_open3d:
            result["open3d"][f"{size}x{size}"] = bench_open3d(frames, args.voxel)
            for engine in ("ScalableTSDFVolume", "VoxelBlockGrid"):
                o3 = result["open3d"][f"{size}x{size}"].get(engine)
                if o3:
                    ours = result["integrate"][f"{size}x{size}"]["first_pass"]["median_ms"]
                    result["open3d"][f"{size}x{size}"][f"ratio_ours_over_{engine}"] = round(ours / o3["median_ms"], 2)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
