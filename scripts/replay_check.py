"""Does the policy act as it was trained? Replay a recorded LIBERO demonstration's init state in closed loop.

    .venv/bin/python scripts/replay_check.py DEMO.hdf5 POLICY_DIR [--init-states sampled] [--replan 0] \\
        [--ensemble 0] [--out runs/replay_check]

A policy over-fitted to one demonstration, started from the same init state, must succeed: the
simulator is deterministic, so every difference between training and acting (image orientation,
normalisation, chunk order, the gripper's sign, un-normalisation, clipping) shows up as a failure
that teacher-forced accuracy cannot see. The script checks, in order:

1. **the observation at reset** equals the demonstration's first sample (images, state): the data
   the policy learned from is what the env gives it;
2. **the recorded actions replayed open loop** succeed (the demonstration is reproducible);
3. **the policy on the recorded observations** (teacher-forced, no feedback): the L1 error of each
   predicted action against the demonstration's, at each step;
4. **the policy in closed loop** from the same init state: success, steps, and how far the
   end-effector strays from the demonstrated path at each step (the first step beyond 2 cm is the
   point where errors start to compound).

Writes ``<out>/replay_check.json`` and ``<out>/replay_check.png`` (end-effector deviation and
per-step action error). ``check(...)`` is the same as a function (the slow test uses it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def load_demo(path: Path, demo: int = 0) -> dict[str, Any]:
    import h5py

    with h5py.File(path, "r") as f:
        g = f[f"data/demo_{demo}"]
        spec = json.loads(f["data"].attrs["env_spec"])
        info = json.loads(f["data"].attrs["env_args"])["vla_spatial"]
        out = {
            "actions": g["actions"][:],
            "state": g["obs/state"][:],
            "trial": int(g.attrs["trial"]),
            "suite": info["suite"],
            "task_id": int(info["task_id"]),
            "cameras": [c["name"] for c in spec["cameras"]],
        }
    return out


def _env(demo: dict[str, Any], init_states: str):
    from envs.registry import make_env

    cfg = {
        "name": "libero",
        "suite": demo["suite"],
        "cameras": demo["cameras"],
        "depth": False,
        "segmentation": False,
        "init_states": init_states,
    }
    return make_env(cfg, demo["task_id"])


class _Trace:
    """A subscriber: the end-effector position and the action of every step."""

    def __init__(self) -> None:
        self.ee: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []

    def on_episode_start(self, episode) -> None:
        self.ee.append(np.asarray(episode.observation.state[:3], dtype=np.float64))

    def on_step(self, episode, action, observation, reward, info) -> None:
        self.actions.append(np.asarray(action, dtype=np.float64))
        self.ee.append(np.asarray(observation.state[:3], dtype=np.float64))

    def on_episode_end(self, episode, result) -> None:
        pass

    def episode_logs(self, out):
        return []


def check(
    demo_file: Path, policy_dir: Path, init_states: str = "sampled", replan: int = 0, ensemble: float = 0.0
) -> dict[str, Any]:
    from vla.agents import make_agent
    from vla.rollout.runtime import run_episode

    demo = load_demo(demo_file)
    env = _env(demo, init_states)
    res: dict[str, Any] = {"demo": str(demo_file), "policy": str(policy_dir), "trial": demo["trial"]}
    try:
        obs, _ = env.reset(options={"trial": demo["trial"]})
        first = _first_sample(demo_file, demo["cameras"])  # what training reads: through the data pipeline
        res["reset_image_max_diff"] = {
            c: int(np.abs(obs.cameras[c].rgb.astype(int) - first[f"cameras/{c}/rgb"]).max()) for c in demo["cameras"]
        }
        res["reset_state_max_diff"] = float(np.abs(obs.state - first["state"]).max())
        success = False
        for t, a in enumerate(demo["actions"]):  # 2. the demonstration replayed open loop
            _, _, terminated, _, info = env.step(a)
            if info.get("success"):
                success = True
                break
        res["open_loop_demo_success"], res["open_loop_demo_steps"] = success, t + 1
        agent = make_agent({"name": "vla", "checkpoint": str(policy_dir), "replan": replan, "ensemble": ensemble})
        res["teacher_forced_l1"] = _teacher_forced(agent, demo_file, demo)
        trace = _Trace()
        key = {"env": "libero", "suite": demo["suite"], "task_id": demo["task_id"], "trial": demo["trial"]}
        r = run_episode(env, agent, key, [trace])
        n = min(len(trace.ee), len(demo["state"]))
        dev = np.linalg.norm(np.stack(trace.ee[:n]) - demo["state"][:n, :3], axis=1)
        beyond = np.flatnonzero(dev > 0.02)
        res.update(
            closed_loop_success=bool(r.success),
            closed_loop_steps=int(r.steps),
            closed_loop_error=r.error,
            ee_deviation_m=[round(float(x), 4) for x in dev],
            first_step_beyond_2cm=int(beyond[0]) if len(beyond) else None,
            demo_steps=int(len(demo["actions"])),
        )
    finally:
        env.close()
    return res


def _first_sample(demo_file: Path, cameras: list[str]) -> dict[str, Any]:
    from vla.data import DemoSource

    src = DemoSource([demo_file], key=None, cameras=cameras)
    try:
        return src.sample(0).obs
    finally:
        src.close()


def _teacher_forced(agent, demo_file: Path, demo: dict[str, Any]) -> list[float]:
    """Per step, the mean |a_pred - a_demo| of the policy's first predicted action on the recorded observation."""
    from vla.data import DemoSource

    policy = agent.policy
    src = DemoSource([demo_file], key=None, chunk=policy.config.chunk, cameras=policy.config.inputs.cameras)
    out = []
    for i in range(len(src)):
        s = src.sample(i)
        pred = policy.infer_batch([s.obs])[0, 0]
        out.append(round(float(np.abs(pred - demo["actions"][i]).mean()), 4))
    src.close()
    return out


def plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    ax[0].plot(np.asarray(res["ee_deviation_m"]) * 100)
    ax[0].axhline(2, color="grey", lw=0.8, ls="--")
    ax[0].set(title="closed loop: end-effector off the demo (cm)", xlabel="step")
    ax[1].plot(res["teacher_forced_l1"])
    ax[1].set(title="teacher-forced |a - a_demo| (mean over dims)", xlabel="step")
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("demo", type=Path, help="an HDF5 file written by record= (its first demonstration is used)")
    ap.add_argument("policy", type=Path, help="a policy directory (vla-train's out/policy or a checkpoint)")
    ap.add_argument("--init-states", default="sampled", choices=("sampled", "official"))
    ap.add_argument("--replan", type=int, default=0)
    ap.add_argument("--ensemble", type=float, default=0.0)
    ap.add_argument("--out", type=Path, default=Path("runs/replay_check"))
    a = ap.parse_args()
    res = check(a.demo, a.policy, a.init_states, a.replan, a.ensemble)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "replay_check.json").write_text(json.dumps(res, indent=2))
    plot(res, a.out / "replay_check.png")
    brief = {k: v for k, v in res.items() if k not in ("ee_deviation_m", "teacher_forced_l1")}
    brief["teacher_forced_l1_mean"] = round(float(np.mean(res["teacher_forced_l1"])), 4)
    print(json.dumps(brief, indent=2))
    return 0 if res["closed_loop_success"] else 1


if __name__ == "__main__":
    sys.exit(main())
