"""The learned VLA served: a tiny Qwen2.5-VL policy of the real classes (random weights: no trained
weights exist here) exported, loaded by ``vla-serve``'s ``policy_path`` path, batched across two
simulators; every served action chunk equals the policy's own answer for that observation."""

from __future__ import annotations

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from envs.spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec  # noqa: E402
from tests.serving import served  # noqa: E402
from vla.serve import PolicyClient  # noqa: E402

pytestmark = pytest.mark.slow  # building and running the tiny backbone takes tens of seconds on 2 cores


def _tiny_policy():
    from omegaconf import OmegaConf

    from vla.actions import ActionStats
    from vla.config import CONFIG_DIR, schema_defaults
    from vla.policy import ModelConfig, PolicyConfig, build_policy

    def group(name: str, target: str) -> dict:
        y = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / name))
        y.pop("defaults", None)
        return OmegaConf.to_container(OmegaConf.merge(schema_defaults(target), y))

    m = {**group("model/tiny_qwen2_5_vl.yaml", "vla.policy.backbone:ModelConfig"), "image_size": 56}
    p = {**group("policy/house.yaml", "vla.policy.config:PolicyConfig"), "chunk": 2}
    rng = np.random.default_rng(0)
    stats = {"house_nav": ActionStats.from_actions(rng.uniform([-0.25, -0.25, -0.5], [0.25, 0.25, 0.5], (200, 3)))}
    policy = build_policy(ModelConfig.from_dict(m), PolicyConfig.from_dict(p), stats)
    policy.eval()
    return policy


def _spec() -> EnvSpec:
    return EnvSpec(
        family="house",
        action=ActionSpec((-0.25, -0.25, -0.5), (0.25, 0.25, 0.5), ("forward_m", "left_m", "yaw_rad")),
        state=ArraySpec((3,), "float64"),
        cameras=(CameraSpec("ego", 48, 48, depth=False, instance=False),),
    )


def _obs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "prompt": "go to the bed",
        "step": seed,
        "state": np.zeros(3),
        "cameras/ego/rgb": rng.integers(0, 255, (48, 48, 3), dtype=np.uint8),
        "cameras/ego/depth": np.ones((48, 48), np.float32),
        "cameras/ego/K": np.array([[24.0, 0, 24], [0, 24.0, 24], [0, 0, 1]]),
        "cameras/ego/T_world_cam": np.eye(4),
    }


def test_the_learned_policy_is_served_batched(tmp_path):
    from vla.serve.cli import build_server

    policy = _tiny_policy()
    path = policy.save_pretrained(tmp_path / "policy")
    server = build_server({"policy_path": str(path), "agent": {"name": "random"}, "port": 0})
    want = {k: policy.infer_batch([_obs(k)])[0] for k in range(6)}  # the policy's own answers, one at a time
    got: dict[int, np.ndarray] = {}
    with served(server.policy) as srv:
        with PolicyClient(srv.url) as c:
            meta = c.metadata
        assert meta["agent"] == "vla" and "house_nav" in meta["action_statistics"]

        def sim(ks) -> None:
            with PolicyClient(srv.url) as c:
                c.reset("go to the bed", _spec())
                for k in ks:
                    got[k] = c.infer(_obs(k)).action

        threads = [threading.Thread(target=sim, args=(ks,)) for ks in ([0, 1, 2], [3, 4, 5])]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        h = srv.health()
    assert sorted(got) == list(range(6))
    for k in range(6):
        assert got[k].shape == (2, 3)  # a chunk of 2 actions
        np.testing.assert_allclose(got[k], want[k], atol=1e-6)
    assert h["inferred"] == 6
