"""Demonstration files in the official formats, both ways.

A short rendered LIBERO episode is recorded with ``record=``; then LIBERO's and robomimic's own
loaders read the file (and LIBERO's own env, rebuilt from the file's ``env_args``, reproduces
its first stored image and end-effector position from the stored state); our readers read it
back, its no-noops and LeRobot v3 conversions are written and read again.
"""

import json

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest

from vla.data.lerobot import read_lerobot, write_lerobot
from vla.data.libero_hdf5 import read_libero_hdf5
from vla.data.noops import is_noop, keep_mask, write_no_noops
from vla.eval.evaluate import EvalSpec, evaluate

ENV = {"name": "libero", "suite": "libero_goal", "resolution": 64, "hard_reset": False, "max_steps": 5}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One rendered 5-step episode (random actions) recorded in the official layout."""
    root = tmp_path_factory.mktemp("rec")
    from vla.rollout import record

    orig = record.DemoRecorder.on_episode_end

    def keep_all(self, episode, result):  # keep the episode whatever its outcome
        result.success = True
        orig(self, episode, result)

    record.DemoRecorder.on_episode_end = keep_all
    try:
        spec = EvalSpec(
            env=ENV,
            agent={"name": "random"},
            out=str(root / "run"),
            tasks=[7],
            trials_per_task=1,
            workers=0,
            record=str(root / "demos"),
        )
        evaluate(spec, progress=False)
    finally:
        record.DemoRecorder.on_episode_end = orig
    (path,) = (root / "demos").glob("*_demo.hdf5")
    return path


def test_libero_and_robomimic_loaders_read_the_file(recorded):
    import robomimic.utils.file_utils as FileUtils
    from libero.libero.utils.dataset_utils import get_dataset_info
    from libero.lifelong.datasets import get_dataset

    from vla.data.compat import robomimic_numpy_compat

    robomimic_numpy_compat()  # robomimic 0.2.0 calls np.bool, gone since numpy 1.24 (not about our file)

    assert recorded.name == "turn_on_the_stove_demo.hdf5"
    env_meta = FileUtils.get_env_metadata_from_dataset(str(recorded))
    assert env_meta["type"] == 1 and env_meta["env_name"] == "Libero_Tabletop_Manipulation"
    get_dataset_info(str(recorded), verbose=False)  # LIBERO's own summary: parses every attribute it needs
    modality = {"rgb": ["agentview_rgb", "eye_in_hand_rgb"], "low_dim": ["gripper_states", "joint_states", "ee_states"]}
    dataset, shape_meta = get_dataset(str(recorded), obs_modality=modality, seq_len=1)
    assert shape_meta["ac_dim"] == 7 and shape_meta["all_shapes"]["agentview_rgb"] == [3, 64, 64]
    assert len(dataset) == 5
    item = dataset[2]
    with h5py.File(recorded) as f:
        demo = f["data/demo_0"]
        np.testing.assert_allclose(item["actions"][0], demo["actions"][2])
        expected = demo["obs/agentview_rgb"][2].transpose(2, 0, 1) / 255.0  # robomimic: CHW in [0, 1]
        np.testing.assert_allclose(item["obs"]["agentview_rgb"][0], expected)
        assert f["data"].attrs["macros_image_convention"] == "opengl" and f["data"].attrs["tag"] == "libero-v1"
        assert demo.attrs["model_file"].startswith("<mujoco")


def test_libero_env_rebuilt_from_env_args_reproduces_the_stored_frame(recorded):
    """LIBERO's TASK_MAPPING env, built from the file's env_args and set to the stored state,
    renders the stored image pixel for pixel (the images are in LIBERO's own orientation) and
    puts the end effector where the stored ee_pos says."""
    from libero.libero.envs import TASK_MAPPING

    with h5py.File(recorded) as f:
        env_args = json.loads(f["data"].attrs["env_args"])
        demo = f["data/demo_0"]
        state0, xml = demo["states"][0], demo.attrs["model_file"]
        stored_img, stored_ee = demo["obs/agentview_rgb"][0], demo["obs/ee_pos"][0]
    env = TASK_MAPPING[env_args["problem_name"]](**env_args["env_kwargs"])
    try:
        env.reset()
        env.reset_from_xml_string(xml)
        env.sim.reset()
        env.sim.set_state_from_flattened(state0)
        env.sim.forward()
        obs = env._get_observations(force_update=True)
        # live observations read the kinematics of the last physics substep: within 0.1 mm of the state
        np.testing.assert_allclose(obs["robot0_eef_pos"], stored_ee, atol=1e-4)
        diff = np.abs(obs["agentview_image"].astype(int) - stored_img.astype(int))
        assert diff.mean() < 1.0, f"stored image differs from LIBERO's render: mean abs {diff.mean():.2f}"
    finally:
        env.close()


def test_our_reader_gives_protocol_images(recorded):
    (ep,) = list(read_libero_hdf5(recorded, extra=True))
    with h5py.File(recorded) as f:
        demo = f["data/demo_0"]
        np.testing.assert_array_equal(ep.images["agentview"][1], demo["obs/agentview_rgb"][1][::-1, ::-1])
        np.testing.assert_array_equal(ep.actions, demo["actions"][()])
        np.testing.assert_allclose(ep.state[:, :3], demo["obs/ee_pos"][()], rtol=1e-6)
    assert ep.task == "turn on the stove" and ep.meta["variant"] == "vla_spatial" and len(ep) == 5
    assert ep.extra["agentview_K"][0][1, 1] < 0  # stored as OpenGL buffers: rows bottom-up


def test_no_noops_filter_and_file(recorded, tmp_path):
    # OpenVLA's criterion: no motion and an unchanged gripper; a first action only needs no motion
    assert is_noop([0, 0, 0, 0, 0, 0, -1]) and not is_noop([0, 0, 0.01, 0, 0, 0, -1])
    assert not is_noop([0, 0, 0, 0, 0, 0, 1], prev_action=[0.3, 0, 0, 0, 0, 0, -1])
    acts = np.array([[0, 0, 0, 0, 0, 0, -1], [0.5, 0, 0, 0, 0, 0, -1], [0, 0, 0, 0, 0, 0, -1], [0, 0, 0, 0, 0, 0, 1]])
    assert keep_mask(acts).tolist() == [False, True, False, True]

    src = tmp_path / recorded.name
    src.write_bytes(recorded.read_bytes())
    with h5py.File(src, "a") as f:  # make steps 1 and 2 no-ops (the gripper command kept)
        a = f["data/demo_0/actions"]
        rows = a[()]
        rows[1, :6] = 0.0
        rows[2, :6] = 0.0
        rows[1, 6] = rows[2, 6] = rows[0, 6]
        a[...] = rows
    dst = tmp_path / "libero_goal_no_noops" / recorded.name
    counts = write_no_noops(src, dst)
    assert counts == {"demos_in": 1, "demos_out": 1, "steps_in": 5, "steps_out": 3}
    with h5py.File(dst) as f:
        assert dict(f["data"].attrs) == {}  # as OpenVLA's regeneration: no file attributes
        assert f["data/demo_0/dones"][()].tolist() == [0, 0, 1]
    (ep,) = list(read_libero_hdf5(dst))  # the instruction comes from the task's name
    assert ep.task == "turn on the stove" and ep.meta["variant"] == "no_noops" and len(ep) == 3
    with h5py.File(src) as f:
        np.testing.assert_array_equal(ep.actions, f["data/demo_0/actions"][()][[0, 3, 4]])


def test_lerobot_v3_written_and_read_back(recorded, tmp_path):
    eps = list(read_libero_hdf5(recorded)) * 2  # two episodes sharing a data and a video file
    root = tmp_path / "lerobot"
    info = write_lerobot(eps, root)
    assert info["codebase_version"] == "v3.0" and info["total_episodes"] == 2 and info["total_frames"] == 10
    for rel in (
        "meta/info.json",
        "meta/stats.json",
        "meta/tasks.parquet",
        "meta/episodes/chunk-000/file-000.parquet",
        "data/chunk-000/file-000.parquet",
        "videos/observation.images.image/chunk-000/file-000.mp4",
    ):
        assert (root / rel).is_file(), rel
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [e["dataset_from_index"] for e in episodes] == [0, 5]
    assert episodes[1]["videos/observation.images.image/from_timestamp"] == pytest.approx(5 / 20)
    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert b"pandas" in tasks.schema.metadata and tasks.to_pydict()["task"] == ["turn on the stove"]
    back = list(read_lerobot(root))
    assert len(back) == 2
    for a, b in zip(eps, back):
        assert b.task == a.task
        np.testing.assert_allclose(b.actions, a.actions, atol=1e-6)  # float32 in parquet
        np.testing.assert_allclose(b.state, a.state, atol=1e-6)
        err = np.abs(b.images["agentview"].astype(int) - a.images["agentview"].astype(int)).mean()
        assert err < 6.0, f"video frames too far from the originals: {err:.2f}"  # H.264 is lossy
    with pytest.raises(ValueError, match="already holds"):
        write_lerobot(eps, root)


@pytest.mark.slow
def test_vla_data_generates_a_suite_and_resumes(tmp_path):
    """The CLI end to end on one task: expert episodes recorded, merged, no-noops and LeRobot
    written, the manifest counts them; a second run does no new episode and ends in the same files."""
    import subprocess
    import sys

    from tests.conftest import ROOT, cli_env

    out = tmp_path / "data"
    cmd = [
        sys.executable,
        "-m",
        "vla.data.cli",
        "libero",
        "suite=libero_goal",
        "tasks=[7]",
        "trials=3",
        "demos_per_task=2",
        "resolution=64",
        "cameras=[agentview]",
        "workers=1",
        "noops=drop",
        "formats=[hdf5,lerobot]",
        f"out={out}",
        "progress=false",
    ]
    r = subprocess.run(cmd, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    root = out / "libero_goal"
    m = json.loads((root / "manifest.json").read_text())
    task = m["tasks"]["7"]
    assert (
        task["attempts"] == 3 and task["demos"] == 2 and task["sources"] == [[0, k] for k in range(2)][: task["demos"]]
    )
    with h5py.File(root / "hdf5" / "turn_on_the_stove_demo.hdf5") as f:
        assert f["data"].attrs["num_demos"] == 2 and f["data/demo_1"].attrs["trial"] == 1
    (ep0, ep1) = list(read_libero_hdf5(root / "no_noops" / "turn_on_the_stove_demo.hdf5"))
    assert m["noops"]["steps_in"] - m["noops"]["steps_out"] >= 0
    assert len(list(read_lerobot(root / "lerobot", images=False))) == 2
    mtime = (root / "rounds" / "0" / "episodes.jsonl").stat().st_mtime_ns
    r = subprocess.run(cmd, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (root / "rounds" / "0" / "episodes.jsonl").stat().st_mtime_ns == mtime  # nothing ran again
    assert json.loads((root / "manifest.json").read_text())["tasks"]["7"]["demos"] == 2
