"""env.perturb: LIBERO-Plus's robustness factors as seeded env options. Each factor changes what its
table in envs/libero/perturb.py says, by the stated magnitude, as a function of the trial only, and
nothing else of the protocol (no factor: the nominal observation, bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.libero import perturb as P
from envs.registry import make_env


def test_specs_are_parsed_and_bad_ones_are_refused_by_name():
    assert P.parse("camera:2+light:1") == {"camera": 2, "light": 1}
    assert P.parse("camera:0") == {} and P.parse("") == {} and P.parse(None) == {}
    assert P.canonical("noise:1+camera:3") == "camera:3+noise:1"  # FACTORS' order, whatever was typed
    for bad, msg in (
        ("cameras:1", "unknown factor 'cameras'"),
        ("camera:4", "must be 0-3"),
        ("camera:x", "integer"),
        ("light:1+light:2", "given twice"),
    ):
        with pytest.raises(ValueError, match=msg):
            P.parse(bad)
    with pytest.raises(ValueError, match="unknown factor"):
        make_env({"name": "libero", "suite": "libero_object", "perturb": "fog:1"}, 0)


def test_paraphrases_keep_the_objects_and_depend_only_on_the_trial():
    text = "pick up the alphabet soup and place it in the basket"
    seen = set()
    for trial in range(20):
        for level in (1, 2, 3):
            out = P.paraphrase(text, level, P.rng(trial, "language"))
            assert out == P.paraphrase(text, level, P.rng(trial, "language"))
            assert "alphabet soup" in out and "basket" in out
            assert "pick up" not in out and " place " not in out  # both verbs reworded
            seen.add(out)
    assert len(seen) > 20


def test_each_factor_changes_its_part_of_the_scene_by_its_stated_magnitude():
    cfg = {"name": "libero", "suite": "libero_object", "resolution": 32, "cameras": ["agentview"], "hard_reset": False}
    nominal = make_env(cfg, 0)
    perturbed = make_env({**cfg, "perturb": "camera:1+robot:1+noise:1+layout:1+texture:1"}, 0)
    try:
        o0, _ = nominal.reset(options={"trial": 0})
        o1, _ = perturbed.reset(options={"trial": 0})
        soup0 = nominal.scene_truth().object("alphabet_soup_1").position
        soup1 = perturbed.scene_truth().object("alphabet_soup_1").position
        a0, a1 = o0.cameras["agentview"], o1.cameras["agentview"]
        # camera: 3 cm (level 1) from where it was, the intrinsics unchanged
        assert np.linalg.norm(a1.T_world_cam[:3, 3] - a0.T_world_cam[:3, 3]) == pytest.approx(0.03, abs=1e-6)
        np.testing.assert_allclose(a1.K, a0.K)
        # robot: the arm starts elsewhere (0.05 rad per joint at level 1)
        assert np.abs(o1.sensors["joint_states"] - o0.sensors["joint_states"]).max() > 0.02
        # layout: the soup moved ~1.5 cm horizontally (it then settles)
        assert 0.005 < np.linalg.norm((soup1 - soup0)[:2]) < 0.03
        assert o1.instruction == o0.instruction  # no language factor
        assert perturbed.env_spec.info["perturb"] == "camera:1+robot:1+texture:1+noise:1+layout:1"
        # the same trial again: the same scene and the same noise (hard_reset=false keeps the model:
        # nothing accumulates), another trial: another draw
        o1b, _ = perturbed.reset(options={"trial": 0})
        # (a few pixels of a LIBERO reset differ between two resets of one trial even unperturbed; a
        # new noise draw would differ by ~3 grey levels on average)
        assert np.abs(o1b.cameras["agentview"].rgb.astype(int) - a1.rgb.astype(int)).mean() < 0.5
        np.testing.assert_allclose(o1b.cameras["agentview"].T_world_cam, a1.T_world_cam, atol=1e-9)
        o2, _ = perturbed.reset(options={"trial": 1})
        assert np.linalg.norm(o2.cameras["agentview"].T_world_cam[:3, 3] - a1.T_world_cam[:3, 3]) > 1e-3
    finally:
        nominal.close()
        perturbed.close()
