#!/usr/bin/env python
"""``env.render_quality=fast`` against the default (docs/BENCHMARKS.md, "render_quality=fast").

Two LIBERO envs, one per quality, take the same seeded actions from the same sampled init states; the
simulator states must stay bit-identical (the fast copy only draws). Per camera, on every step's frames:
the RGB images' PSNR and SSIM (the fast image against the default one), the depth's absolute error
(metres, pixels valid in both) and the instance masks' disagreement. Then, for the workloads that read
every frame (``record``: two RGB cameras; ``memory``: + depth + masks), the median ``LiberoEnv.step``
of each quality, the two alternated twice in one process, and a reset. A side-by-side picture of one
step (default | fast, one row per camera) goes next to the JSON.

    MUJOCO_GL=egl OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_render_quality.py \
        --out runs/bench_render_quality.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKLOADS = {"record": (False, False), "memory": (True, True)}  # (depth, segmentation)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--suite", default="libero_object")
    p.add_argument("--task", type=int, default=0)
    p.add_argument("--resolution", type=int, default=256)
    p.add_argument("--trials", type=int, default=3, help="sampled init states compared (trials 0..N-1)")
    p.add_argument("--steps", type=int, default=20, help="control steps per trial compared, and timed per workload")
    p.add_argument("--out", default=None, help="JSON file for the numbers (the picture beside it)")
    return p


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Structural similarity of two uint8 RGB images on their luminance (Wang et al. 2004: Gaussian
    window sigma 1.5, K1 0.01, K2 0.03)."""
    from scipy.ndimage import gaussian_filter

    w = np.array([0.299, 0.587, 0.114])
    x, y = a.astype(np.float64) @ w, b.astype(np.float64) @ w
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def f(z: np.ndarray) -> np.ndarray:
        return gaussian_filter(z, 1.5, truncate=3.5)

    mx, my = f(x), f(y)
    vx, vy, cxy = f(x * x) - mx * mx, f(y * y) - my * my, f(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(s.mean())


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0**2 / mse)


def _actions(n: int, seed: int) -> np.ndarray:
    a = np.random.default_rng(seed).uniform(-0.4, 0.4, (n, 7))
    a[:, 6] = np.where(np.arange(n) < n // 2, -1.0, 1.0)  # the gripper closes half way
    return a


def _env(a, quality: str, depth: bool, segmentation: bool):
    from envs.libero.env import LiberoEnv

    return LiberoEnv(
        a.suite, a.task, cameras=("agentview", "wrist"), resolution=a.resolution, depth=depth,
        segmentation=segmentation, init_states="sampled", render_quality=quality,
    )  # fmt: skip


def compare(a) -> tuple[dict, np.ndarray]:
    envs = {q: _env(a, q, True, True) for q in ("default", "fast")}
    per: dict[str, dict[str, list]] = {}
    picture = None
    try:
        for trial in range(a.trials):
            obs = {q: e.reset(options={"trial": trial})[0] for q, e in envs.items()}
            for k, act in enumerate(_actions(a.steps, trial)):
                obs = {q: e.step(act)[0] for q, e in envs.items()}
                s = [envs[q].sim_env.sim.get_state().flatten() for q in envs]
                if not np.array_equal(s[0], s[1]):
                    raise SystemExit(
                        f"trial {trial} step {k}: the simulator states differ (the fast copy moved physics)"
                    )
                for cam, d in obs["default"].cameras.items():
                    f = obs["fast"].cameras[cam]
                    m = per.setdefault(cam, {"psnr": [], "ssim": [], "depth_abs": [], "mask_disagree": []})
                    m["psnr"].append(psnr(d.rgb, f.rgb))
                    m["ssim"].append(ssim(d.rgb, f.rgb))
                    valid = np.isfinite(d.depth) & np.isfinite(f.depth)
                    m["depth_abs"].append(np.abs(d.depth[valid] - f.depth[valid]))
                    m["mask_disagree"].append(float(np.mean(d.instance != f.instance)))
                if trial == 0 and k == a.steps - 1:
                    picture = np.concatenate(
                        [
                            np.concatenate([obs["default"].cameras[c].rgb, obs["fast"].cameras[c].rgb], 1)
                            for c in obs["default"].cameras
                        ]
                    )
        faces = {
            "default": int(envs["default"].sim_env.sim.model._model.mesh_facenum.sum()),
            "fast": int(envs["fast"]._keep_context.fast.model.mesh_facenum.sum()),
        }
    finally:
        for e in envs.values():
            e.close()
    out = {"faces": faces, "frames_per_camera": a.trials * a.steps, "cameras": {}}
    for cam, m in per.items():
        depth = np.concatenate(m["depth_abs"])
        out["cameras"][cam] = {
            "psnr_db": {"min": round(min(m["psnr"]), 2), "mean": round(float(np.mean(m["psnr"])), 2)},
            "ssim": {"min": round(min(m["ssim"]), 4), "mean": round(float(np.mean(m["ssim"])), 4)},
            "depth_abs_m": {
                q: round(float(np.quantile(depth, p)), 5) for q, p in (("median", 0.5), ("p95", 0.95), ("p99", 0.99))
            },
            "mask_disagree": {
                "mean": round(float(np.mean(m["mask_disagree"])), 4),
                "max": round(max(m["mask_disagree"]), 4),
            },
        }
    return out, picture


def timing(a) -> dict:
    out: dict = {}
    acts = _actions(a.steps, 0)
    for w, (depth, seg) in WORKLOADS.items():
        runs: dict[str, list[float]] = {"default": [], "fast": []}
        resets: dict[str, list[float]] = {"default": [], "fast": []}
        for _ in range(2):  # alternated: default, fast, default, fast
            for q in ("default", "fast"):
                env = _env(a, q, depth, seg)
                try:
                    env.reset(options={"trial": 0})
                    for act in acts:
                        t0 = time.perf_counter()
                        env.step(act)
                        runs[q].append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    env.reset(options={"trial": 1})
                    resets[q].append(time.perf_counter() - t0)
                finally:
                    env.close()
        med = {q: 1000 * float(np.median(t)) for q, t in runs.items()}
        out[w] = {
            "step_median_ms": {q: round(v, 1) for q, v in med.items()},
            "reset_s": {q: [round(t, 2) for t in v] for q, v in resets.items()},
            "default_over_fast": round(med["default"] / med["fast"], 2),
        }
        print(
            f"{w}: step {med['default']:.0f} ms default, {med['fast']:.0f} ms fast "
            f"({med['default'] / med['fast']:.2f}x)",
            file=sys.stderr,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    from envs import _gl  # noqa: F401  (headless GL before MuJoCo)
    from envs.libero.render_quality import FACE_FRACTION

    out: dict = {"suite": a.suite, "task": a.task, "resolution": a.resolution, "face_fraction": FACE_FRACTION}
    out["load_before"] = os.getloadavg()
    out["images"], picture = compare(a)
    out["timing"] = timing(a)
    out["load_after"] = os.getloadavg()
    text = json.dumps(out, indent=2)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text + "\n")
        if picture is not None:
            import imageio.v2 as imageio

            imageio.imwrite(Path(a.out).with_suffix(".png"), picture)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
