#!/usr/bin/env python
"""Serving benchmarks: live map queries against inference, and many simulators against one server.

(a) **Queries vs inference.** One controlling client replays a recorded house episode (256x256 RGB-D
    with masks, the memory agent on the server) while 8 query clients hammer ``map.query`` in a
    closed loop; blocks with and without the query load alternate, so background load hits both
    alike. Reported: the controller's infer round-trip latency p50/p99 in each condition, their
    ratio (goal: p99 ratio <= 1.1), and queries answered per second. ``--think-ms`` is the time the
    controller spends between calls (the simulator stepping and rendering); 0 sends back to back.
(c) **openpi's client vs ours.** One server (``TorchConvPolicy`` served with ``env=house``), one
    simulator at a time replaying the same recorded observations back to back, alternately
    through openpi's own ``WebsocketClientPolicy`` (openpi's protocol on ``/openpi``, the house
    key map) and through our ``PolicyClient``, ``--blocks`` blocks of ``--block-steps`` each:
    actions/s and round-trip p50/p99 of each, and their ratios.
(b) **Batching.** N = 1, 2, 4, 8 controlling clients (separate processes) against one server,
    batching on and off: actions/s and the clients' infer latency. Policies: the memory agent (one
    agent per session: a batch is a loop), ``TorchConvPolicy`` below, a small convolutional net
    over the RGB image and state run by torch on the CPU, and ``DeviceLikePolicy``, whose call
    costs what an accelerator's forward pass does (a fixed cost plus a little per item). The last
    two are untrained stand-ins for the learned VLA (no weights exist here), served as a
    ``BatchModel``. Runs on and off alternate, ``--reps`` times each.

The server runs in its own process (``python -m vla.serve.cli``), as a user would start it.

    .venv/bin/python scripts/bench_serve.py --out runs/bench_serve.json
    .venv/bin/python scripts/bench_serve.py --part a --think-ms 0
    .venv/bin/python scripts/bench_serve.py --part c --blocks 8 --block-steps 50
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# ----------------------------------------------------------------------------- the stand-in model
class TorchConvPolicy:
    """Conv net over the first camera's RGB (stride-2 convs, global pooling) and the state ->
    3 base actions (the house env's). Untrained, seeded; batched forward in ``infer_batch``."""

    name = "torch-conv"

    def __init__(self, seed: int = 0, threads: int = 1) -> None:
        import torch

        torch.set_num_threads(int(threads))
        g = torch.Generator().manual_seed(int(seed))
        self.torch = torch
        nn = torch.nn
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )  # fmt: skip
        self.head = nn.Linear(64 + 3, 3)
        for p in list(self.net.parameters()) + list(self.head.parameters()):
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
        self.net.eval()

    def metadata(self) -> dict[str, Any]:
        n = sum(p.numel() for p in self.net.parameters()) + sum(p.numel() for p in self.head.parameters())
        return {"agent": self.name, "model": f"torch-conv ({n} parameters, untrained stand-in)"}

    def infer_batch(self, observations: list[dict[str, Any]]) -> list[np.ndarray]:
        torch = self.torch
        rgb = np.stack([next(v for k, v in o.items() if k.endswith("/rgb")) for o in observations])
        state = np.stack([np.asarray(o["state"], dtype=np.float32)[:3] for o in observations])
        with torch.inference_mode():
            x = torch.from_numpy(rgb).permute(0, 3, 1, 2).float().div_(255.0)
            z = torch.cat([self.net(x), torch.from_numpy(state)], dim=1)
            a = torch.tanh(self.head(z)).numpy().astype(np.float64) * 0.2
        return list(a)

    def reset(self, instruction, spec) -> None:  # the agent protocol (make_agent checks it)
        pass

    def act(self, observation) -> np.ndarray:
        return self.infer_batch([observation.to_dict()])[0]

    def answer(self, question) -> str:
        return ""


class DeviceLikePolicy:
    """A stand-in for a policy on an accelerator: one call costs ``call_ms + item_ms * batch``
    (waited out, as a host thread waits on a GPU, releasing the interpreter), so a batch of 8
    costs little more than one. The actions are a fixed function of the state."""

    name = "device-like"

    def __init__(self, seed: int = 0, call_ms: float = 20.0, item_ms: float = 1.0) -> None:
        self.call_s, self.item_s = float(call_ms) / 1000, float(item_ms) / 1000

    def metadata(self) -> dict[str, Any]:
        return {"agent": self.name, "model": f"device-like ({self.call_s * 1e3:g} ms + {self.item_s * 1e3:g} ms/item)"}

    def infer_batch(self, observations: list[dict[str, Any]]) -> list[np.ndarray]:
        time.sleep(self.call_s + self.item_s * len(observations))
        return [np.tanh(np.asarray(o["state"], dtype=np.float64)[:3]) * 0.2 for o in observations]

    def reset(self, instruction, spec) -> None:
        pass

    def act(self, observation) -> np.ndarray:
        return self.infer_batch([observation.to_dict()])[0]

    def answer(self, question) -> str:
        return ""


# ----------------------------------------------------------------------------- recorded observations
def record(path: Path, size: int, steps: int, seed: int = 0) -> None:
    """A random walk through the first test apartment: ``steps`` observation dicts in one .npz."""
    code = f"""
import numpy as np
from envs.registry import make_env
from vla.agents import make_agent
env = make_env({{"name": "house", "split": "test", "num_scenes": 1, "num_trials": 10, "max_steps": {steps},
                "width": {size}, "height": {size}, "render_map": False}}, 0)
agent = make_agent({{"name": "random"}}, seed={seed})
obs, _ = env.reset(seed={seed}, options={{"trial": 0}})
agent.reset(env.instruction, env.env_spec)
out = {{"spec": np.frombuffer(__import__("json").dumps(env.env_spec.to_dict()).encode(), np.uint8)}}
for i in range({steps}):
    for k, v in obs.to_dict().items():
        out[f"{{i}}|{{k}}"] = np.asarray(v)
    obs, *_ = env.step(agent.act(obs) * np.array([1.0, 0.3, 0.5]))
env.close()
np.savez({str(path)!r}, **out)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


def load_obs(path: Path) -> tuple[list[dict[str, Any]], dict]:
    data = np.load(path, allow_pickle=False)
    spec = json.loads(bytes(data["spec"]).decode())
    steps: dict[int, dict[str, Any]] = {}
    for key in data.files:
        if "|" not in key:
            continue
        i, k = key.split("|", 1)
        v = data[key]
        steps.setdefault(int(i), {})[k] = v.item() if v.ndim == 0 and k in ("prompt", "step") else v
    obs = [steps[i] for i in sorted(steps)]
    for o in obs:
        o["prompt"], o["step"] = str(o["prompt"]), int(o["step"])
        o["sensors/blocked"] = bool(o["sensors/blocked"])
    return obs, spec


def observations(size: int, steps: int) -> tuple[list[dict[str, Any]], dict]:
    cache = ROOT / "runs" / "bench_serve" / f"obs_{size}px_{steps}.npz"
    if not cache.exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        print(f"recording {steps} observations at {size}px -> {cache}", file=sys.stderr)
        record(cache, size, steps)
    return load_obs(cache)


# ----------------------------------------------------------------------------- server and clients
class Server:
    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'scripts'}"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vla.serve.cli", *args, "port=0", "log_level=warning"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=ROOT,
        )  # fmt: skip
        lines = []
        for line in self.proc.stderr:
            lines.append(line)
            m = re.search(r"listening on (ws://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError("server did not start: " + "".join(lines)[-2000:])
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def _query_process(url: str, targets: list[str], n_threads: int, go, stop, counts, nice: int = 0) -> None:
    from vla.serve import PolicyClient, ServerError

    if nice:
        os.nice(nice)  # the query clients yield the CPU to the server (as clients on other machines would)

    def run(k: int) -> None:
        with PolicyClient(url) as c:
            i = 0
            while not stop.is_set():
                if not go.wait(0.05):
                    continue
                t = targets[(i + k) % len(targets)]
                try:
                    if i % 2:
                        c.query(target=t)
                    else:
                        c.query(question=f"where is the {t.replace('_', ' ')}?")
                    with counts.get_lock():
                        counts[0] += 1
                except ServerError:
                    with counts.get_lock():
                        counts[1] += 1
                i += 1

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def part_a(args) -> dict[str, Any]:
    from vla.serve import PolicyClient

    obs, spec = observations(256, args.steps_a)
    server = Server("agent=memory", *args.server_args)
    ctx = mp.get_context("spawn")
    go, stop, counts = ctx.Event(), ctx.Event(), ctx.Array("q", 2)
    try:
        with PolicyClient(server.url) as c:
            c.reset(obs[0]["prompt"], spec, seed=0)
            for o in obs[: args.warmup]:  # warm-up: numba caches, a map to ask about
                c.infer(o)
                time.sleep(args.think_ms / 1000)
            targets = sorted({o["category"] for o in c.objects().objects})
            qp = ctx.Process(
                target=_query_process, args=(server.url, targets, args.query_clients, go, stop, counts, args.query_nice)
            )
            qp.start()
            time.sleep(3.0)  # the query clients connect
            lat = {"idle": [], "load": []}
            srv_ms = {"idle": [], "load": []}
            load_s, q0 = 0.0, 0
            blocks: list[tuple[str, float]] = []
            i = args.warmup
            for b in range(args.blocks):
                cond = "load" if b % 2 else "idle"
                if cond == "load":
                    go.set()
                    time.sleep(0.2)
                    q0, t0 = counts[0], time.perf_counter()
                block = []
                for _ in range(args.block_steps):
                    o = obs[i % len(obs)]
                    i += 1
                    t = time.perf_counter()
                    r = c.infer(o)
                    block.append((time.perf_counter() - t) * 1e3)
                    srv_ms[cond].append(r.server_timing["infer_ms"])
                    time.sleep(args.think_ms / 1000)
                lat[cond].extend(block)
                blocks.append((cond, pct(block, 99)))
                if cond == "load":
                    load_s += time.perf_counter() - t0
                    answered = counts[0] - q0
                    go.clear()
                    lat.setdefault("queries", []).append(answered)
                    time.sleep(0.2)
            stop.set()
            qp.join(30)
            health = c.health()
    finally:
        stop.set()
        server.close()
    out = {
        "think_ms": args.think_ms,
        "query_clients": args.query_clients,
        "query_nice": args.query_nice,
        "server_args": args.server_args,
        "steps_per_condition": len(lat["idle"]),
        "queries_per_s": round(sum(lat["queries"]) / load_s, 1),
        "query_errors": int(counts[1]),
        "snapshot_copies": health["snapshot_copies"],
    }
    for cond in ("idle", "load"):
        out[cond] = {
            "p50_ms": round(pct(lat[cond], 50), 2),
            "p99_ms": round(pct(lat[cond], 99), 2),
            "server_infer_p50_ms": round(pct(srv_ms[cond], 50), 2),
            "server_infer_p99_ms": round(pct(srv_ms[cond], 99), 2),
        }
    out["p99_ratio"] = round(out["load"]["p99_ms"] / out["idle"]["p99_ms"], 3)
    # paired: each loaded block against the idle block just before it (robust to a noisy stretch)
    pairs = [blocks[k + 1][1] / blocks[k][1] for k in range(0, len(blocks) - 1, 2)]
    out["p99_ratio_paired_median"] = round(float(np.median(pairs)), 3)
    out["block_p99_ms"] = [(c, round(v, 1)) for c, v in blocks]
    out["p50_ratio"] = round(out["load"]["p50_ms"] / out["idle"]["p50_ms"], 3)
    return out


def _controller(url: str, obs_path: str, spec: dict, steps: int, offset: int, barrier, results) -> None:
    from vla.serve import PolicyClient

    obs, _ = load_obs(Path(obs_path))
    with PolicyClient(url) as c:
        c.reset(obs[0]["prompt"], spec, seed=offset)
        for o in obs[:3]:
            c.infer(o)
        barrier.wait()
        lat = []
        t0 = time.perf_counter()
        for k in range(steps):
            o = obs[(offset + k) % len(obs)]
            t = time.perf_counter()
            c.infer(o)
            lat.append((time.perf_counter() - t) * 1e3)
        results.put((time.perf_counter() - t0, lat))


def _run_clients(ctx, url: str, obs_path: str, spec: dict, n: int, steps: int) -> tuple[float, list[float]]:
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [
        ctx.Process(target=_controller, args=(url, obs_path, spec, steps, 7 * k, barrier, results)) for k in range(n)
    ]
    for p in procs:
        p.start()
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(30)
    return max(g[0] for g in got), [x for g in got for x in g[1]]


def part_b(args) -> list[dict[str, Any]]:
    """Both servers (batching on, off) stay up; runs alternate between them, ``--reps`` times per
    client count, so the machine's background load falls on both alike. actions/s: the median run."""
    obs, spec = observations(args.size_b, 120)
    obs_path = str(ROOT / "runs" / "bench_serve" / f"obs_{args.size_b}px_120.npz")
    ctx = mp.get_context("spawn")
    rows = []
    policies = {
        "memory": ["agent=memory"],
        "torch-conv": ["agent=random", "agent.name=bench_serve:TorchConvPolicy"],
        "device-like": ["agent=random", "agent.name=bench_serve:DeviceLikePolicy"],
    }
    for pname in args.policies.split(","):
        common = [*policies[pname], f"max_batch={args.max_batch}", f"max_wait_ms={args.max_wait_ms}"]
        servers = {True: Server(*common, "batching=true"), False: Server(*common, "batching=false")}
        try:
            for n in (1, 2, 4, 8):
                runs: dict[bool, list[tuple[float, list[float]]]] = {True: [], False: []}
                for rep in range(args.reps):
                    for batching in (True, False) if rep % 2 == 0 else (False, True):
                        runs[batching].append(_run_clients(ctx, servers[batching].url, obs_path, spec, n, args.steps_b))
                for batching in (True, False):
                    rates = sorted(n * args.steps_b / wall for wall, _ in runs[batching])
                    lat = [x for _, ls in runs[batching] for x in ls]
                    row = {
                        "policy": pname,
                        "batching": batching,
                        "clients": n,
                        "actions_per_s": round(float(np.median(rates)), 1),
                        "actions_per_s_runs": [round(r, 1) for r in rates],
                        "p50_ms": round(pct(lat, 50), 2),
                        "p99_ms": round(pct(lat, 99), 2),
                    }
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
            from vla.serve import PolicyClient

            for batching, srv in servers.items():
                with PolicyClient(srv.url) as c:
                    h = c.health()
                rows.append({"policy": pname, "batching": batching, "mean_batch_all_runs": h["mean_batch"],
                             "max_batch_seen": h["max_batch_seen"]})  # fmt: skip
        finally:
            for srv in servers.values():
                srv.close()
    return rows


def part_c(args) -> dict[str, Any]:
    """openpi's client and ours against one server, same model, alternating blocks (see the doc)."""
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    from vla.serve import PolicyClient
    from vla.openpi_keys import KeyMap

    size = args.size_b
    obs, spec = observations(size, 120)
    keymap = KeyMap.for_env("house")
    house = ["env=house", "env.split=test", "env.num_scenes=1", f"env.width={size}", f"env.height={size}"]
    srv = Server("agent=random", "agent.name=bench_serve:TorchConvPolicy", *house, "env.render_map=false")
    lat: dict[str, list[float]] = {"openpi": [], "ours": []}
    rates: dict[str, list[float]] = {"openpi": [], "ours": []}
    try:
        theirs = WebsocketClientPolicy(srv.url + "/openpi")
        ours = PolicyClient(srv.url).connect()
        ours.reset(obs[0]["prompt"], spec)
        sent = {"openpi": [keymap.openpi_observation(o) for o in obs], "ours": obs}

        def call(kind: str, i: int) -> np.ndarray:
            o = sent[kind][i % len(obs)]
            return theirs.infer(o)["actions"][0] if kind == "openpi" else ours.infer(o).action

        for kind in ("openpi", "ours"):  # warm-up, and the same action for the same observation
            for i in range(args.warmup):
                call(kind, i)
        assert np.allclose(call("openpi", 3), call("ours", 3))
        for b in range(args.blocks):
            for kind in ("openpi", "ours") if b % 2 == 0 else ("ours", "openpi"):
                t_block = time.perf_counter()
                for i in range(args.block_steps):
                    t0 = time.perf_counter()
                    call(kind, b * args.block_steps + i)
                    lat[kind].append((time.perf_counter() - t0) * 1e3)
                rates[kind].append(args.block_steps / (time.perf_counter() - t_block))
    finally:
        for c in (locals().get("ours"), getattr(locals().get("theirs"), "_ws", None)):
            if c is not None:
                c.close()
        srv.close()
    out: dict[str, Any] = {"policy": "torch-conv", "image": f"{size}x{size}", "blocks": args.blocks}
    for kind in ("openpi", "ours"):
        out[kind] = {
            "actions_per_s": round(float(np.median(rates[kind])), 1),
            "p50_ms": round(pct(lat[kind], 50), 2),
            "p99_ms": round(pct(lat[kind], 99), 2),
        }
    out["ratio_openpi_over_ours"] = {
        k: round(out["openpi"][k] / out["ours"][k], 3) for k in ("actions_per_s", "p50_ms", "p99_ms")
    }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("a", "b", "ab", "c"), default="ab")
    ap.add_argument("--out", default=None)
    ap.add_argument("--think-ms", type=float, default=20.0)
    ap.add_argument("--query-clients", type=int, default=8)
    ap.add_argument("--query-nice", type=int, default=0, help="nice level of the query clients' process")
    ap.add_argument("--server-args", nargs="*", default=[], help="extra vla-serve overrides for part a")
    ap.add_argument("--steps-a", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--block-steps", type=int, default=100)
    ap.add_argument("--size-b", type=int, default=128)
    ap.add_argument("--steps-b", type=int, default=60)
    ap.add_argument("--policies", default="memory,torch-conv,device-like")
    ap.add_argument("--reps", type=int, default=3, help="runs per client count and batching mode (part b)")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--max-wait-ms", type=float, default=2.0)
    args = ap.parse_args()
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg": os.getloadavg()},
        "command": " ".join(sys.argv),
    }
    if "a" in args.part:
        result["queries_vs_infer"] = part_a(args)
        print(json.dumps(result["queries_vs_infer"], indent=2), file=sys.stderr, flush=True)
    if "b" in args.part:
        result["batching"] = part_b(args)
    if "c" in args.part:
        result["openpi_vs_ours"] = part_c(args)
    result["machine"]["load_avg_end"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
