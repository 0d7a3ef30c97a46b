"""env.perturb: LIBERO-Plus's robustness factors as seeded env options. Each factor changes what its
table in envs/libero/perturb.py says, by the stated magnitude, as a function of the trial only, and
nothing else of the protocol (no factor: the nominal observation, bit for bit)."""

from __future__ import annotations

from types import SimpleNamespace

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


def _model(env):
    """The MuJoCo model an env renders (robosuite's wrapper around it: ``.sim.model._model``)."""
    return env.sim_env.sim.model._model


def _light_and_texture(m0, m1, level):
    """What ``light`` and ``texture`` at ``level`` did to the model ``m0`` (nominal) to make ``m1``: the scales
    of the lights' diffuse and of their ambient (``{"diffuse": [...], "ambient": [...]}``, a light whose
    nominal value is 0 left out), each light's direction's turn in degrees, and per re-coloured material
    the colour it was mixed towards (``(m1 - (1 - 0.25 L) m0) / 0.25 L``)."""
    scales, turns = {"diffuse": [], "ambient": []}, []
    for i in range(m0.nlight):
        for k in scales:
            a, b = getattr(m0, f"light_{k}")[i], getattr(m1, f"light_{k}")[i]
            if np.all(a == 0):
                assert np.all(b == 0)
                continue
            s = b / a
            assert np.ptp(s) < 1e-6, (k, s)  # one factor for the three channels
            scales[k].append(float(s[0]))
        d0, d1 = m0.light_dir[i], m1.light_dir[i]
        assert np.linalg.norm(d1) == pytest.approx(1.0)
        turns.append(float(np.degrees(np.arccos(np.clip(d0 @ d1 / np.linalg.norm(d0), -1, 1)))))
    mix = 0.25 * level
    recoloured = [
        i for i in range(m0.nmat) if any(k in m0.material(i).name.lower() for k in ("table", "floor", "wall"))
    ]
    colours = np.array([(m1.mat_rgba[i][:3] - (1 - mix) * m0.mat_rgba[i][:3]) / mix for i in recoloured])
    for i in recoloured:
        assert m1.mat_rgba[i][3] == m0.mat_rgba[i][3]  # the alpha kept
    others = [i for i in range(m0.nmat) if i not in recoloured]
    np.testing.assert_array_equal(m1.mat_rgba[others], m0.mat_rgba[others])  # objects, robot: their colours
    return {k: np.array(v) for k, v in scales.items()}, np.array(turns), colours


def test_each_factor_changes_its_part_of_the_scene_by_its_stated_magnitude():
    cfg = {"name": "libero", "suite": "libero_object", "resolution": 32, "cameras": ["agentview"], "hard_reset": False}
    nominal = make_env(cfg, 0)
    perturbed = make_env({**cfg, "perturb": "camera:1+robot:1+light:1+noise:1+layout:1+texture:1"}, 0)
    noisy = make_env({**cfg, "perturb": "noise:1"}, 0)  # the nominal scene, seen through noisy sensors
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
        # light: each light's diffuse scaled by one factor in U[0.8, 1.2], its direction turned by at most
        # 10 degrees (LIBERO's lights have no ambient: 0 scaled stays 0; the draws' whole ranges, ambient
        # included, are the next test's)
        scales, turns, colours = _light_and_texture(_model(nominal), _model(perturbed), 1)
        diffuse = scales["diffuse"]
        assert len(diffuse) == 2 and np.all((diffuse >= 0.8) & (diffuse <= 1.2)) and np.abs(diffuse - 1).max() > 0.01
        assert len(scales["ambient"]) == 0
        assert len(turns) == 2 and np.all(turns <= 10.0) and turns.max() > 0.1
        # texture: the table, floor and wall materials (white in LIBERO) mixed a quarter of the way to a
        # random colour in [0, 1]^3 (half of the way, or an eighth, would put it outside, or all above 0.5)
        assert len(colours) >= 4 and np.all((colours > -1e-6) & (colours < 1 + 1e-6))
        assert colours.min() < 0.25 and colours.max() > 0.75
        assert o1.instruction == o0.instruction  # no language factor
        assert perturbed.env_spec.info["perturb"] == "camera:1+robot:1+light:1+texture:1+noise:1+layout:1"
        # the same trial again: the same scene and the same noise (hard_reset=false keeps the model:
        # nothing accumulates), another trial: another draw
        o1b, _ = perturbed.reset(options={"trial": 0})
        # (a few pixels of a LIBERO reset differ between two resets of one trial even unperturbed; a
        # new noise draw would differ by ~3 grey levels on average)
        assert np.abs(o1b.cameras["agentview"].rgb.astype(int) - a1.rgb.astype(int)).mean() < 0.5
        np.testing.assert_allclose(o1b.cameras["agentview"].T_world_cam, a1.T_world_cam, atol=1e-9)
        assert np.array_equal(_light_and_texture(_model(nominal), _model(perturbed), 1)[2], colours)
        o2, _ = perturbed.reset(options={"trial": 1})
        assert np.linalg.norm(o2.cameras["agentview"].T_world_cam[:3, 3] - a1.T_world_cam[:3, 3]) > 1e-3
        # noise: against the nominal observations of the same trial (the reset's, then after no-op steps,
        # which move both envs alike), Gaussian noise of the stated std, a new draw at every observation:
        # RGB 4 grey levels (plus rounding), depth 1 % of the depth, the state and joint angles 0.002. The
        # tolerances are ~10 % (20 % for the 60 state numbers): twice or half the magnitude fails.
        pairs = [(o0, noisy.reset(options={"trial": 0})[0])]
        noop = np.zeros(nominal.action_space.shape)
        pairs += [(nominal.step(noop)[0], noisy.step(noop)[0]) for _ in range(3)]
        rgb, depth, state = [], [], []
        for clean, noised in pairs:
            c, n = clean.cameras["agentview"], noised.cameras["agentview"]
            unclipped = (c.rgb > 16) & (c.rgb < 239)  # 4 std from 0 and 255: no noise clipped away
            rgb.append((n.rgb.astype(float) - c.rgb.astype(float))[unclipped])
            depth.append(n.depth / c.depth - 1.0)
            state += [noised.state - clean.state, noised.sensors["joint_states"] - clean.sensors["joint_states"]]
        assert not np.array_equal(rgb[0], rgb[1])  # a new draw at every observation
        assert 3.6 < np.concatenate(rgb).std() < 4.4
        assert 0.009 < np.concatenate(depth).std() < 0.011
        state = np.concatenate(state)
        assert len(state) == 60 and 0.0016 < state.std() < 0.0024 and abs(state.mean()) < 0.001
    finally:
        nominal.close()
        perturbed.close()
        noisy.close()


_SCENE = """
<mujoco>
  <asset>
    <material name="table_top" rgba="0.6 0.5 0.4 1"/>
    <material name="floorplane" rgba="0.2 0.2 0.2 1"/>
    <material name="Wall_paint" rgba="0.9 0.9 0.8 0.5"/>
    <material name="mug" rgba="0.1 0.3 0.8 1"/>
  </asset>
  <worldbody>
    <light name="sun" directional="true" dir="0 0 -1" diffuse="0.5 0.5 0.5" ambient="0.2 0.2 0.2"/>
    <light name="lamp" pos="1 0 2" dir="0 -0.6 -0.8" diffuse="0.3 0.4 0.5" ambient="0.1 0.1 0.1"/>
    <geom type="plane" size="1 1 0.1" material="floorplane"/>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("level", [1, 2, 3])
def test_light_and_texture_draws_span_their_stated_ranges(level):
    """Over 100 trials of a small MuJoCo scene (lights with an ambient, a material of each re-coloured
    kind and one that is not): every diffuse and ambient scale lies in U[1 - 0.2 L, 1 + 0.2 L] and
    reaches near both ends, every direction turns by at most 10 L degrees and some by nearly that,
    every re-coloured material's colour is mixed 0.25 L of the way to one anywhere in [0, 1]^3; a
    trial applied twice is the same (the nominal model restored first)."""
    import mujoco

    m0, m = mujoco.MjModel.from_xml_string(_SCENE), mujoco.MjModel.from_xml_string(_SCENE)
    sim = SimpleNamespace(model=SimpleNamespace(_model=m), data=SimpleNamespace(_data=mujoco.MjData(m)))
    perturber = P.Perturber({"light": level, "texture": level})
    diffuse, ambient, turns, colours = [], [], [], []
    for trial in range(100):
        perturber.apply_scene(sim, None, trial)
        s, t, c = _light_and_texture(m0, m, level)
        assert len(s["diffuse"]) == len(s["ambient"]) == 2 and len(c) == 3  # two lights; table, floor, wall
        diffuse.append(s["diffuse"]), ambient.append(s["ambient"]), turns.append(t), colours.append(c)
    perturber.apply_scene(sim, None, 99)
    assert np.array_equal(_light_and_texture(m0, m, level)[2], colours[-1])
    turns, colours = np.concatenate(turns), np.concatenate(colours)
    lo, hi = 1 - 0.2 * level, 1 + 0.2 * level
    for scales in (np.concatenate(diffuse), np.concatenate(ambient)):  # each drawn on its own
        assert np.all((scales >= lo - 1e-6) & (scales <= hi + 1e-6))
        assert scales.min() < lo + 0.02 * level and scales.max() > hi - 0.02 * level
    assert np.all(turns <= 10.0 * level + 1e-6) and turns.max() > 8.0 * level
    assert np.all((colours > -1e-6) & (colours < 1 + 1e-6))
    assert colours.min() < 0.02 and colours.max() > 0.98
