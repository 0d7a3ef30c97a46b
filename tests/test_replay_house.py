"""The apartments' pipeline is exact up to the policy (docs/POLICY.md, "Does the policy act as it was
trained?"): one memory-navigator demonstration in one train apartment, and

* the memory inputs a memory-reading policy gets live (``agent=vla`` builds them from the policy's
  config) equal, at every step of the demonstration replayed open loop, the entries training reads
  from the memory cache -- map pixels and object table alike;
* the demonstration's actions as a policy's 256 bins can express them (normalised with statistics of
  the demonstration, binned, decoded, un-normalised) still reach the target and stop, with the
  apartments' ``data.action_normalization=bounds``.

What remains between these and a closed-loop success is the policy itself (the slow replay test and
POLICY.md's over-fit run). ~30 s: one episode of the navigator, its memory replayed twice."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import VENV_BIN, cli_env
from vla.experiment.common import HOUSE_MEMORY

ROOT = Path(__file__).resolve().parents[1]

MEMORY = yaml.safe_load(HOUSE_MEMORY)  # the apartments experiments' memory inputs, as they pass them


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("house_demo")
    args = ["env=house", "env.stop_action=true", "env.split=train", "env.num_scenes=1", "eval.trials_per_task=1"]
    args += ["agent=memory", f"record={out / 'demo'}", f"out={out / 'rec'}", "progress=false"]
    r = subprocess.run([str(VENV_BIN / "vla-rollout"), *args], capture_output=True, text=True, env=cli_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    (path,) = sorted((out / "demo").glob("*_demo.hdf5"))
    return path


def test_live_memory_inputs_equal_the_cached_training_entries_at_every_step(demo, tmp_path):
    from vla.experiment.replay_check import _env, load_demo, open_loop

    from vla.data import DemoSource, MemoryCache
    from vla.policy import memory_inputs

    d = load_demo(demo)
    src = DemoSource([demo], key=None, chunk=4, cameras=["ego"], memory=MemoryCache(tmp_path / "cache", MEMORY))
    steps = src.episode_range(src.episodes()[0])
    env = _env(d, "sampled")
    try:
        live = memory_inputs(MEMORY)
        live.reset(env.env_spec)
        res = open_loop(env, d["trial"], d["actions"], live, lambda t: src.sample(steps[t]).obs)
        # the comparison sees a difference when there is one: against the entries one step late
        live.reset(env.env_spec)
        late = open_loop(
            env, d["trial"], d["actions"], live, lambda t: src.sample(steps[min(t + 1, len(steps) - 1)]).obs
        )
    finally:
        env.close()
        src.close()
    assert res["success"] and res["steps"] == len(d["actions"]), res
    assert res["memory_mismatched_steps"] == [] and res["memory_topdown_max_pixels_differing"] == 0, res
    assert len(late["memory_mismatched_steps"]) > len(d["actions"]) // 2, late


def test_the_demonstration_as_the_policy_bins_express_it_still_succeeds(demo):
    from vla.experiment.replay_check import PATH, _env, load_demo, open_loop

    from vla.actions import ActionStats, decoded

    d = load_demo(demo)
    stats = ActionStats.from_actions(d["actions"], mask=[True, True, True, False], normalization="bounds")
    q = decoded(d["actions"], stats)
    assert 0 < np.abs(q - d["actions"]).max() < 0.01  # the bins change every action a little
    env = _env(d, "sampled")
    try:
        res = open_loop(env, d["trial"], q, states=d["state"], where=PATH["house"][0])
        exact = open_loop(env, d["trial"], d["actions"], states=d["state"], where=PATH["house"][0])
    finally:
        env.close()
    assert res["success"], res
    # the recorded actions retrace the recorded path; the binned ones drift from it (half a bin a step, adding up)
    assert exact["max_path_deviation_m"] == 0.0 and res["max_path_deviation_m"] > 0.0, (exact, res)
