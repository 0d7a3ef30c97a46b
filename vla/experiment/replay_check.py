"""Does the policy act as it was trained? Replay a recorded demonstration's start in closed loop.

    .venv/bin/python -m vla.experiment.replay_check DEMO.hdf5 POLICY_DIR [--init-states sampled] [--replan 0] \\
        [--ensemble 0] [--memory-cache runs/replay_check/memory_cache] [--out runs/replay_check]

A policy over-fitted to one demonstration, started from the same start (a LIBERO init state, an
apartment's trial), must succeed: the simulators are deterministic, so every difference between
training and acting (image orientation, normalisation, chunk order, the gripper's sign,
un-normalisation, clipping, the memory inputs) shows up as a failure that teacher-forced accuracy
cannot see. The script checks, in order:

1. **the observation at reset** equals the demonstration's first sample as training reads it
   (images, state; for a policy that reads the spatial memory, also its map and object table from
   the training cache): the data the policy learned from is what the env gives it;
2. **the recorded actions replayed open loop** succeed (the demonstration is reproducible); for a
   memory-reading policy, at every step of that replay the live memory inputs (what ``agent=vla``
   feeds the policy) are compared with the cached ones training read (map pixels that differ, object
   tables that differ); then the same actions **as the policy's 256 bins can express them** (normalised
   with its statistics, binned, decoded, un-normalised) must succeed too: a policy that predicts every
   token right can do no better (``data.action_normalization``);
3. **the policy on the recorded observations** (teacher-forced, no feedback): the L1 error of each
   predicted action against the demonstration's, at each step;
4. **the policy in closed loop** from the same start: success, steps, and how far the end-effector
   (LIBERO) or the base (apartments) strays from the demonstrated path at each step (the first step
   beyond 2 cm / 10 cm is where errors start to compound).

Writes ``<out>/replay_check.json`` and ``<out>/replay_check.png`` (deviation and per-step action
error). ``check(...)`` is the same as a function (the tests use it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

# per family: the state's position slice, and the deviation that counts as leaving the demonstrated path
PATH = {"libero": (slice(0, 3), 0.02), "house": (slice(0, 2), 0.10)}


def load_demo(path: Path, demo: int = 0) -> dict[str, Any]:
    import h5py

    with h5py.File(path, "r") as f:
        g = f[f"data/demo_{demo}"]
        spec = json.loads(f["data"].attrs["env_spec"])
        labels = g["actions"][:]  # the teacher's, for agent=dagger recordings
        out = {
            "actions": labels,
            "executed": g["executed_actions"][:] if "executed_actions" in g else labels,  # what ran
            "state": g["obs/state"][:],
            "trial": int(g.attrs["trial"]),
            "family": spec["family"],
            "spec": spec,
            "episodes": len([k for k in f["data"] if k.startswith("demo_")]),
            "cameras": [c["name"] for c in spec["cameras"]],
        }
        if spec["family"] == "libero":
            info = json.loads(f["data"].attrs["env_args"])["vla_spatial"]
            out.update(suite=info["suite"], task_id=int(info["task_id"]))
    if out["family"] not in PATH:
        raise ValueError(f"{path}: replay_check knows the libero and house families, not {out['family']!r}")
    return out


def _env(demo: dict[str, Any], init_states: str):
    from envs.registry import make_env

    if demo["family"] == "house":  # the apartment by its seed (task name house_<seed>), its trial by the file's
        spec = demo["spec"]
        seed = int(spec["task"]["name"].rsplit("_", 1)[1])
        cfg = {"name": "house", "seed": seed, "stop_action": "stop" in spec["action"]["names"]}
        cam = spec["cameras"][0]
        cfg.update(width=int(cam["width"]), height=int(cam["height"]), max_steps=int(spec["task"]["max_steps"]))
        return make_env(cfg, 0)
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
    """A subscriber: the position (end-effector or base) of every step."""

    def __init__(self, where: slice) -> None:
        self.where = where
        self.path: list[np.ndarray] = []

    def on_episode_start(self, episode) -> None:
        self.path.append(np.asarray(episode.observation.state[self.where], dtype=np.float64))

    def on_step(self, episode, action, observation, reward, info) -> None:
        self.path.append(np.asarray(observation.state[self.where], dtype=np.float64))

    def on_episode_end(self, episode, result) -> None:
        pass

    def episode_logs(self, out):
        return []


def _source(demo_file: Path, policy, memory_cache: Path):
    """The demonstration as training reads it: the policy's cameras and chunk, its memory entries from the
    training cache (built on first use, keyed on the policy's memory config and the file)."""
    from vla.data import DemoSource, MemoryCache

    cfg = policy.config
    cache = MemoryCache(memory_cache, cfg.memory) if cfg.inputs.uses_memory else None
    return DemoSource([demo_file], key=None, chunk=cfg.chunk, cameras=list(cfg.inputs.cameras), memory=cache)


def _differences(live: dict[str, Any], cached: dict[str, Any]) -> dict[str, Any]:
    """How the live observation's memory entries differ from the cached ones."""
    out: dict[str, Any] = {}
    if "memory/topdown" in cached:
        d = np.abs(live["memory/topdown"].astype(int) - cached["memory/topdown"].astype(int)).max(axis=-1)
        out["topdown_pixels_differing"] = int((d > 0).sum())
    if "memory/text" in cached:
        out["text_equal"] = live.get("memory/text") == cached["memory/text"]
    return out


def open_loop(env, trial: int, actions: np.ndarray, live=None, cached=None, states=None, where=None) -> dict[str, Any]:
    """Replay ``actions`` open loop from ``trial``'s start: success and steps (with ``states``, the recorded
    states, and ``where``, their position slice: the largest distance from them); with ``live`` memory inputs
    (a reset :class:`~vla.transforms.map_inputs.MemoryInputs`) and ``cached`` (step -> the observation as
    training reads it), also the steps whose live memory entries differ from the cached ones."""
    obs, _ = env.reset(options={"trial": trial})
    mismatched, worst, success, dev = [], 0, False, 0.0
    for t, a in enumerate(actions):
        if states is not None and t < len(states):
            dev = max(dev, float(np.linalg.norm(obs.state[where] - states[t, where])))
        if live is not None:
            diff = _differences(live(obs).to_dict(), cached(t))
            worst = max(worst, diff.get("topdown_pixels_differing", 0))
            if diff.get("topdown_pixels_differing", 0) or not diff.get("text_equal", True):
                mismatched.append(t)
        obs, _, terminated, truncated, info = env.step(a)
        success = bool(info.get("success"))
        if success or terminated or truncated:
            break
    out: dict[str, Any] = {"success": success, "steps": t + 1}
    if states is not None:
        out["max_path_deviation_m"] = round(dev, 6)
    if live is not None:
        out.update(memory_mismatched_steps=mismatched, memory_topdown_max_pixels_differing=worst)
    return out


def check(
    demo_file: Path,
    policy_dir: Path,
    init_states: str = "sampled",
    replan: int = 0,
    ensemble: float = 0.0,
    memory_cache: Path | None = None,
    demo_index: int = 0,
) -> dict[str, Any]:
    from vla.actions import decoded
    from vla.agents import make_agent
    from vla.policy import memory_inputs
    from vla.rollout.runtime import run_episode

    demo = load_demo(demo_file, demo_index)
    where, tolerance = PATH[demo["family"]]
    agent = make_agent({"name": "vla", "checkpoint": str(policy_dir), "replan": replan, "ensemble": ensemble})
    src = _source(demo_file, agent.policy, Path(memory_cache or Path(policy_dir).parent / "replay_memory_cache"))
    (episode,) = [e for e in src.episodes() if e.endswith(f"demo_{demo_index}")]
    steps = src.episode_range(episode)  # the demonstration checked
    env = _env(demo, init_states)
    res: dict[str, Any] = {
        "demo": f"{demo_file}#demo_{demo_index}",
        "policy": str(policy_dir),
        "family": demo["family"],
    }
    res["trial"] = demo["trial"]
    try:
        obs, _ = env.reset(options={"trial": demo["trial"]})
        first = src.sample(steps[0]).obs  # 1. what training reads, through the data pipeline
        cams = agent.policy.config.inputs.cameras
        res["reset_image_max_diff"] = {
            c: int(np.abs(obs.cameras[c].rgb.astype(int) - first[f"cameras/{c}/rgb"]).max()) for c in cams
        }
        res["reset_state_max_diff"] = float(np.abs(obs.state - first["state"]).max())
        live = memory_inputs(agent.policy, seed=0)  # the live memory inputs, as agent=vla builds them
        if live is not None:
            live.reset(env.env_spec)
        replay = open_loop(env, demo["trial"], demo["executed"], live, lambda t: src.sample(steps[t]).obs)  # 2.
        res["open_loop_demo_success"], res["open_loop_demo_steps"] = replay.pop("success"), replay.pop("steps")
        res.update(replay)
        stats = agent.policy.stats[agent.policy.dataset_key]  # 2b. the demonstration as the policy's bins express it
        q = open_loop(env, demo["trial"], decoded(demo["actions"], stats), states=demo["state"], where=where)
        res["open_loop_quantised_success"], res["open_loop_quantised_steps"] = q["success"], q["steps"]
        res["open_loop_quantised_max_path_deviation_m"] = q["max_path_deviation_m"]
        res["action_normalization"] = stats.normalization
        res["teacher_forced_l1"] = _teacher_forced(agent.policy, src, steps, demo["actions"])  # 3.
        trace = _Trace(where)
        key = {"env": demo["family"], "task": demo["spec"]["task"]["name"], "trial": demo["trial"]}
        r = run_episode(env, agent, key, [trace])  # 4.
        n = min(len(trace.path), len(demo["state"]))
        dev = np.linalg.norm(np.stack(trace.path[:n]) - demo["state"][:n, where], axis=1)
        beyond = np.flatnonzero(dev > tolerance)
        res.update(
            closed_loop_success=bool(r.success),
            closed_loop_steps=int(r.steps),
            closed_loop_error=r.error,
            path_deviation_m=[round(float(x), 4) for x in dev],
            path_tolerance_m=tolerance,
            first_step_off_path=int(beyond[0]) if len(beyond) else None,
            demo_steps=int(len(demo["actions"])),
        )
    finally:
        env.close()
        src.close()
    return res


def _teacher_forced(policy, src, steps: range, actions: np.ndarray) -> list[float]:
    """Per step, the mean |a_pred - a_demo| of the policy's first predicted action on the recorded observation."""
    out = []
    for t, i in enumerate(steps):
        pred = policy.infer_batch([src.sample(i).obs])[0, 0]
        out.append(round(float(np.abs(pred - actions[t]).mean()), 4))
    return out


def plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    what = "end-effector" if res["family"] == "libero" else "base"
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    ax[0].plot(np.asarray(res["path_deviation_m"]) * 100)
    ax[0].axhline(res["path_tolerance_m"] * 100, color="grey", lw=0.8, ls="--")
    ax[0].set(title=f"closed loop: {what} off the demo (cm)", xlabel="step")
    ax[1].plot(res["teacher_forced_l1"])
    ax[1].set(title="teacher-forced |a - a_demo| (mean over dims)", xlabel="step")
    for a in ax:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("demo", type=Path, help="an HDF5 file written by record=")
    ap.add_argument("--demo-index", type=int, default=0, help="which of its demonstrations (demo_K) to check")
    ap.add_argument("policy", type=Path, help="a policy directory (vla-train's out/policy or a checkpoint)")
    ap.add_argument("--init-states", default="sampled", choices=("sampled", "official"), help="LIBERO only")
    ap.add_argument("--replan", type=int, default=0)
    ap.add_argument("--ensemble", type=float, default=0.0)
    ap.add_argument(
        "--memory-cache",
        type=Path,
        default=None,
        help="where a memory-reading policy's training entries are cached (default: next to the policy)",
    )
    ap.add_argument("--out", type=Path, default=Path("runs/replay_check"))
    a = ap.parse_args()
    res = check(a.demo, a.policy, a.init_states, a.replan, a.ensemble, a.memory_cache, a.demo_index)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "replay_check.json").write_text(json.dumps(res, indent=2))
    plot(res, a.out / "replay_check.png")
    brief = {k: v for k, v in res.items() if k not in ("path_deviation_m", "teacher_forced_l1")}
    brief["teacher_forced_l1_mean"] = round(float(np.mean(res["teacher_forced_l1"])), 4)
    print(json.dumps(brief, indent=2))
    return 0 if res["closed_loop_success"] else 1


if __name__ == "__main__":
    sys.exit(main())
