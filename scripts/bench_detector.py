"""Benchmark of the learned detector and of perception + integration under ``perception=learned``
(issue 27, docs/BENCHMARKS.md): prints JSON.

    .venv/bin/python scripts/bench_detector.py          # a fresh network of the default spec (same cost)
    .venv/bin/python scripts/bench_detector.py --checkpoint runs/detector/run1/best.pt --frames 40

One core (the process is pinned to one CPU, torch and every thread pool set to 1 thread before they load).
Frames: the synthetic apartment's ray caster at 256x256 (:mod:`spatial_memory.synthetic`); a trained
checkpoint and a fresh network of the same spec cost the same (only the number of instances found changes
the connected-components step). Per frame, in one run: the network alone, the detector (network +
instances), the whole ``learned`` perception (depth noise, detector, odometry), the memory's ``integrate``
alone (on the perceived frames) and perceive + integrate; ratios to ``integrate`` alone. Timings are
medians of per-frame process CPU time (robust to other load on a shared machine), wall-clock medians beside.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spatial_memory import SpatialMemory  # noqa: E402
from spatial_memory.detector import DetectorSpec, SegNet, frame_tensor, load_detector, save_checkpoint  # noqa: E402
from spatial_memory.profiles import memory_config_for, profile  # noqa: E402
from spatial_memory.synthetic import apartment_scene, apartment_tour, default_camera  # noqa: E402


def timed(fn, *args) -> tuple[float, float, object]:
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return (time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3, out


def summary(samples) -> dict:
    wall = np.array([s[0] for s in samples])
    cpu = np.array([s[1] for s in samples])
    return {
        "median_ms": round(float(np.median(cpu)), 2),
        "p90_ms": round(float(np.percentile(cpu, 90)), 2),
        "wall_median_ms": round(float(np.median(wall)), 2),
        "n": len(samples),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default=None, help="a trained detector (default: a fresh one of the default spec)")
    ap.add_argument("--frames", type=int, default=40)
    args = ap.parse_args()
    from envs.perception import categories

    cats = categories("house")
    ck = args.checkpoint
    if ck is None:
        ck = str(Path(tempfile.mkdtemp()) / "fresh.pt")
        spec = DetectorSpec(categories=tuple(cats.vocabulary))
        save_checkpoint(ck, spec, SegNet(spec))
    det = load_detector(ck)
    size = det.spec.frame_size
    scene, K = apartment_scene(), default_camera(size[1], size[0])
    frames = [scene.render(T, K, size[1], size[0], step=i) for i, T in enumerate(apartment_tour(args.frames))]
    p = profile({"name": "learned", "checkpoint": ck})
    # warm-up: torch's first calls, the memory's numba cache
    warm_stream, warm_mem = p.stream(("bench", "warm"), cats), SpatialMemory(config=memory_config_for("learned"))
    for f in frames[:3]:
        warm_mem.integrate(warm_stream(f))

    def network(f):
        with torch.inference_mode():
            return det.net(frame_tensor(f.rgb, f.depth, det.spec))

    net_t = [timed(network, f) for f in frames]
    det_t = [timed(det.detect, f.rgb, f.depth) for f in frames]
    stream = p.stream(("bench", "run"), cats)
    perceive_t = [timed(stream, f) for f in frames]
    perceived = [t[2] for t in perceive_t]
    mem = SpatialMemory(config=memory_config_for("learned"))
    integrate_t = [timed(mem.integrate, f) for f in perceived]
    stream2, mem2 = p.stream(("bench", "run"), cats), SpatialMemory(config=memory_config_for("learned"))
    both_t = [timed(lambda f: mem2.integrate(stream2(f)), f) for f in frames]
    integ = summary(integrate_t)["median_ms"]
    res = {
        "checkpoint": args.checkpoint or "fresh network of the default spec",
        "spec": {k: v for k, v in det.spec.to_dict().items() if k != "categories"},
        "categories": len(det.spec.categories),
        "cpu": "one core (pinned), torch 1 thread",
        "frames": len(frames),
        "network_forward": summary(net_t),
        "detector": summary(det_t),
        "perceive_learned": summary(perceive_t),
        "integrate_alone": summary(integrate_t),
        "perceive_plus_integrate": summary(both_t),
        "mean_detections_per_frame": round(float(np.mean([len(f.labels) for f in perceived])), 1),
    }
    res["ratio_detector_over_integrate"] = round(res["detector"]["median_ms"] / integ, 2)
    res["ratio_perceive_plus_integrate_over_integrate"] = round(res["perceive_plus_integrate"]["median_ms"] / integ, 2)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
