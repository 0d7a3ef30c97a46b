"""DAgger's data collection (``agent=dagger``): the learner acts, the non-privileged teacher labels the
states the learner visits, and ``record_keep=all`` keeps every episode, labels as ``actions``."""

import json

import h5py
import numpy as np
import pytest

from vla.agents import make_agent
from vla.cli.rollout import main as rollout_main

HOUSE = ["env=house", "env.use_meshes=false", "env.width=64", "env.height=64", "env.num_scenes=1", "env.split=train"]


def _args(root, *extra):
    return [
        *HOUSE,
        "env.num_trials=1",
        "env.max_steps=12",
        "env.stop_action=true",
        "eval.trials_per_task=1",
        "agent=dagger",
        "agent.learner={name: random}",
        f"record={root / 'demos'}",
        f"out={root / 'run'}",
        "progress=false",
        *extra,
    ]


def test_the_teachers_labels_are_recorded_on_the_learners_states(tmp_path):
    assert rollout_main(_args(tmp_path, "record_keep=all")) == 0
    (demo,) = sorted((tmp_path / "demos").glob("*_demo.hdf5"))
    with h5py.File(demo, "r") as f:
        labels, executed = f["data/demo_0/actions"][:], f["data/demo_0/executed_actions"][:]
        state = f["data/demo_0/obs/state"][:]
    assert labels.shape == executed.shape and labels.shape[1] == 4 and len(labels) >= 2
    assert not np.allclose(labels, executed)  # the random learner drove, the navigator labelled
    # the states are the learner's: the pose moved as the executed (random) actions say, not as the labels
    # (a random policy's first step turns or moves differently from the navigator's first circle step)
    assert np.abs(np.diff(state[:, :3], axis=0)).sum() > 0
    # without record_keep=all the failed episode (random never stops at the goal) leaves no demonstration
    assert labels[0, 3] < 0.5 and abs(labels[0, 2]) > 0  # the navigator's first label: turn on the spot, no stop
    assert rollout_main(_args(tmp_path / "default")) == 0
    assert not list((tmp_path / "default" / "demos").glob("*_demo.hdf5"))


def test_dart_the_teacher_drives_with_noise_and_labels_its_own_clean_action(tmp_path):
    """beta=1 without a learner and with agent.noise: DART's collection (the executed action is the
    teacher's plus Gaussian noise, the label the teacher's own action)."""
    args = _args(tmp_path, "record_keep=all", "agent.beta=1.0", "agent.noise=[0.03,0.0,0.1,0.0]")
    args.remove("agent.learner={name: random}")
    assert rollout_main(args) == 0
    (demo,) = sorted((tmp_path / "demos").glob("*_demo.hdf5"))
    with h5py.File(demo, "r") as f:
        labels, executed = f["data/demo_0/actions"][:], f["data/demo_0/executed_actions"][:]
    delta = executed - labels
    assert np.all(delta[:, [1, 3]] == 0)  # no noise asked on these dimensions
    # std 0.1 on the turn; where the navigator turns at full scale the noise is clipped back to the bound
    assert (delta[:, 2] != 0).sum() >= len(delta) // 2 and 0.01 < np.abs(delta[:, 2]).mean() < 0.3
    assert labels[0, 3] < 0.5 and abs(labels[0, 2]) > 0  # labels are the navigator's: its first turn


def test_execute_bins_records_what_a_spec_token_policy_decodes_for_each_label(tmp_path):
    """agent.execute_bins=256: the executed action is its label's bin centre on the env's bounds (checked by
    hand: a whole number of bins from the bound, at most half a bin from the label), and training's statistics
    under data.action_normalization=spec put label and executed action in the same bin, so a policy that
    predicts every token right drives through the recorded states."""
    from vla.actions import ActionTokenizer
    from vla.train.config import DataConfig
    from vla.train.data import action_statistics, build_sources

    args = _args(tmp_path, "record_keep=all", "agent.beta=1.0", "agent.execute_bins=256", "env.max_steps=20")
    args.remove("agent.learner={name: random}")
    assert rollout_main(args) == 0
    (demo,) = sorted((tmp_path / "demos").glob("*_demo.hdf5"))
    with h5py.File(demo, "r") as f:
        labels, executed = f["data/demo_0/actions"][:], f["data/demo_0/executed_actions"][:]
    from envs.house.config import HouseConfig

    c = HouseConfig()
    lo = np.array([-c.max_forward_m, -c.max_left_m, -c.max_turn_rad])
    hi = -lo
    k = (executed[:, :3] - lo) / (hi - lo) * 255 - 0.5  # bin centres: lo + (hi - lo) (k + 1/2) / 255
    # within 1e-4 of a bin: the file stores float32, the env's turn bound is pi/6 rounded to float32
    assert np.allclose(k, np.round(k), atol=1e-4) and np.all((k > -0.5) & (k < 254.5))
    assert np.all(np.abs(executed[:, :3] - labels[:, :3]) <= (hi - lo) / 255 / 2 + 1e-6)
    assert np.any(executed[:, :3] != labels[:, :3])  # the navigator's actions are not bin centres themselves

    data = DataConfig(
        paths=[str(tmp_path / "demos")],
        action_normalization="spec",
        val_fraction=0.0,
        action_mask=[True, True, True, False],
    )
    train, _, _, norms = build_sources(data, 1, None, tmp_path / "cache", 0)
    (stats,) = action_statistics(train, norms).values()
    assert stats.normalization == "bounds" and np.allclose(stats.min[:3], lo) and np.allclose(stats.max[:3], hi)
    tokens = ActionTokenizer(vocab_size=1000)
    assert np.array_equal(
        tokens.encode(stats.normalize(labels))[:, :3], tokens.encode(stats.normalize(executed))[:, :3]
    )
    with pytest.raises(ValueError, match="execute_bins"):
        make_agent({"name": "dagger", "beta": 1.0, "execute_bins": 1})


def test_a_privileged_teacher_missing_learner_or_bad_noise_is_refused():
    with pytest.raises(ValueError, match="agent.learner"):
        make_agent({"name": "dagger"})
    for noise in ([], [0.1, -0.1, 0.0, 0.0], [float("nan")]):
        with pytest.raises(ValueError, match="agent.noise"):
            make_agent({"name": "dagger", "beta": 1.0, "noise": noise})
    from envs.registry import demo_layout

    house = demo_layout("house").implied_spec("house", [], {}, 3, 3)  # 3 base actions
    with pytest.raises(ValueError, match="agent.noise has 4 values for the env's 3-dimensional action"):
        make_agent({"name": "dagger", "beta": 1.0, "noise": [0.1, 0.1, 0.1, 0.0]}).reset("go", house)
    with pytest.raises(ValueError, match="privileged"):
        make_agent({"name": "dagger", "learner": {"name": "random"}, "teacher": {"name": "scripted"}})


def test_first_trial_runs_a_later_block_of_initial_states(tmp_path):
    """DAgger rounds and val rollouts use initial states no demonstration used: eval.first_trial."""
    args = [*HOUSE, "env.max_steps=2", "eval.first_trial=3", "eval.trials_per_task=2", "agent=random"]
    assert rollout_main([*args, f"out={tmp_path / 'r'}", "progress=false"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "r" / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["trial"] for r in rows) == [3, 4]
    assert (
        rollout_main(
            [
                *args[:-3],
                "eval.first_trial=9",
                "eval.trials_per_task=2",
                "agent=random",
                f"out={tmp_path / 'x'}",
                "progress=false",
            ]
        )
        == 2
    )  # past the scene's 10 states
