"""vla/data on files the project writes itself: recorded house demos, a hand-written official LIBERO
file, a generated GST question set. Truth: what the simulator gave during the recording (observations,
actions, the memory transform run live), hand-built arrays, and the question files themselves."""

import json
import multiprocessing as mp
import os
import pickle
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from envs.registry import make_env
from vla.agents import make_agent
from vla.data import DemoSource, GSTQASource, MemoryCache, Mixture, Sample, SampleSource, split_by_episode
from vla.data.split import split_episodes
from vla.rollout.record import DemoRecorder, merge_demos
from vla.rollout.runtime import Subscriber, run_episode
from vla.transforms.map_inputs import MemoryInputs, MemoryInputsConfig

HOUSE = {"name": "house", "seed": 900001, "use_meshes": False, "width": 64, "height": 64, "max_steps": 60}
MEMORY = MemoryInputsConfig(map_size=(64, 64), inputs=("topdown", "objects", "text", "routes"))  # every group


class Truth(Subscriber):
    """What the simulator gave: every observation (dict form, copied), the action taken on it, and the
    memory transform's entries computed live on that observation."""

    def __init__(self, memory: MemoryInputsConfig) -> None:
        self.config, self.episodes = memory, {}

    def _observe(self, obs) -> None:
        self.obs.append({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in obs.to_dict().items()})
        self.memory.append(dict(self.inputs(obs).memory))  # exactly what a live policy gets

    def on_episode_start(self, episode) -> None:
        self.obs, self.actions, self.memory = [], [], []
        self.inputs = MemoryInputs(self.config)
        self.inputs.reset(episode.env.env_spec)
        self._observe(episode.observation)

    def on_step(self, episode, action, observation, reward, info) -> None:
        self.actions.append(np.asarray(action, dtype=np.float64))
        self._observe(observation)

    def on_episode_end(self, episode, result) -> None:
        if result.success:
            n = len(self.actions)  # the recorder keeps obs 0..n-1: the last observation has no action
            self.episodes[episode.key["trial"]] = {
                "instruction": episode.instruction,
                "obs": self.obs[:n],
                "actions": np.stack(self.actions),
                "memory": self.memory[:n],
            }


@pytest.fixture(scope="module")
def house(tmp_path_factory):
    """Two or three scripted house episodes recorded by the real DemoRecorder, with their truth."""
    root = tmp_path_factory.mktemp("house") / "demos"
    env, agent, truth = make_env(HOUSE, 0), make_agent({"name": "scripted"}), Truth(MEMORY)
    try:
        for trial in range(3):
            key = {"env": "house", "suite": "house/seed900001", "task_id": 0, "task": "house_900001", "trial": trial}
            run_episode(env, agent, key, [DemoRecorder(root), truth], seed=7)
    finally:
        env.close()
    merge_demos(root, {0: "house_900001"})
    assert len(truth.episodes) >= 2, "the scripted expert should finish at least two of these episodes"
    return root, truth.episodes


def episode_id(trial: int) -> str:
    return f"house-seed900001_task000_trial{trial:03d}"


# ---------------------------------------------------------------------------------- official LIBERO files
T_OFFICIAL = (5, 7, 4)


def write_official(path: Path, lengths=T_OFFICIAL, hw=(8, 6), seed=0, corrupt=None) -> dict:
    """A file in LIBERO's official layout (scripts/create_dataset.py), written by hand; returns its arrays."""
    rng = np.random.default_rng(seed)
    truth = {}
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_name"] = "libero_tabletop_manipulation"
        info = {"problem_name": "libero_tabletop_manipulation", "domain_name": "robosuite", "language_instruction": "x"}
        data.attrs["problem_info"] = json.dumps(info)
        data.attrs["macros_image_convention"] = "opengl"
        data.attrs["env_args"] = json.dumps({"type": 1, "env_name": "libero_tabletop_manipulation", "env_kwargs": {}})
        data.attrs["bddl_file_name"] = "libero/bddl_files/libero_spatial/x.bddl"
        for i, n in enumerate(lengths):
            d = data.create_group(f"demo_{i}")
            arrays = {
                "actions": rng.uniform(-1, 1, (n, 7)),
                "obs/agentview_rgb": rng.integers(0, 256, (n, *hw, 3), dtype=np.uint8),
                "obs/eye_in_hand_rgb": rng.integers(0, 256, (n, *hw, 3), dtype=np.uint8),
                "obs/ee_states": rng.normal(size=(n, 6)).astype(np.float32),
                "obs/gripper_states": rng.normal(size=(n, 2)).astype(np.float32),
                "obs/joint_states": rng.normal(size=(n, 7)).astype(np.float32),
                "robot_states": rng.normal(size=(n, 9)),
                "states": rng.normal(size=(n, 20)),
                "rewards": np.eye(n, dtype=np.uint8)[-1],
                "dones": np.eye(n, dtype=np.uint8)[-1],
            }
            arrays["obs/ee_pos"], arrays["obs/ee_ori"] = arrays["obs/ee_states"][:, :3], arrays["obs/ee_states"][:, 3:]
            if corrupt == "short_rgb" and i == 1:
                arrays["obs/agentview_rgb"] = arrays["obs/agentview_rgb"][:-1]
            if corrupt == "nan" and i == 2:
                arrays["actions"][2, 3] = np.nan
            for k, v in arrays.items():
                d.create_dataset(k, data=v)
            d.attrs["num_samples"] = n
            d.attrs["model_file"] = "<mujoco/>"
            d.attrs["init_state"] = arrays["states"][0]
            truth[f"demo_{i}"] = arrays
    return truth


OFFICIAL_NAME = "pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate_demo.hdf5"


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    d = tmp_path_factory.mktemp("official")
    return d / OFFICIAL_NAME, write_official(d / OFFICIAL_NAME)


# ================================================================================== DemoSource
def test_house_samples_are_the_recorded_observations_and_actions(house):
    root, truth = house
    src = DemoSource(root, "house_nav", chunk=3, cameras=("ego",))
    assert isinstance(src, SampleSource)
    # the directory holds every episode twice (.episodes/ and the merged file): read once
    assert sorted(src.episodes()) == sorted(episode_id(k) for k in truth)
    assert len(src) == sum(len(t["actions"]) for t in truth.values())
    np.testing.assert_array_equal(src.actions(), np.concatenate([truth[k]["actions"] for k in sorted(truth)]))
    for trial, t in truth.items():
        idx = src.episode_range(episode_id(trial))
        n = len(t["actions"])
        assert len(idx) == n
        for step, i in enumerate(idx):
            s = src.sample(i)
            rec = t["obs"][step]
            assert s.kind == "action" and s.dataset == "house_nav" and s.episode == episode_id(trial)
            assert s.obs["prompt"] == t["instruction"] == rec["prompt"] and s.obs["step"] == step == rec["step"]
            np.testing.assert_array_equal(s.obs["cameras/ego/rgb"], rec["cameras/ego/rgb"])
            np.testing.assert_array_equal(s.obs["state"], rec["state"])
            assert s.obs["sensors/blocked"] == rec["sensors/blocked"]
            # action t is the action taken on obs t; past the end the last action repeats
            want = [t["actions"][min(step + k, n - 1)] for k in range(3)]
            np.testing.assert_array_equal(s.actions, np.stack(want))
        assert src.episode_of(idx[0]) == episode_id(trial)


def test_full_frames_read_back_as_observations_the_env_declares(house):
    root, truth = house
    src = DemoSource(
        root, "house_nav", cameras=("ego",), camera_fields=("rgb", "depth", "K", "T_world_cam", "instance")
    )
    trial = sorted(truth)[-1]
    spec = src.spec(episode_id(trial))
    assert spec.family == "house" and spec.action.names[:3] == ("forward_m", "left_m", "yaw_rad")
    env = make_env(HOUSE, 0)
    try:
        env_spec = env.env_spec
    finally:
        env.close()
    assert spec.to_dict() == env_spec.to_dict()  # the recorder stored the env's own spec
    step = len(truth[trial]["actions"]) - 1
    s = src.sample(src.episode_range(episode_id(trial))[step])
    env_spec.check_observation(s.obs)
    rec = truth[trial]["obs"][step]
    for f in ("depth", "K", "T_world_cam", "instance"):
        np.testing.assert_array_equal(s.obs[f"cameras/ego/{f}"], rec[f"cameras/ego/{f}"])
    # labels: every instance seen in the episode, not only those of the first frame
    seen = {
        int(i): str(n)
        for o in truth[trial]["obs"]
        for i, n in zip(o["cameras/ego/label_ids"], o["cameras/ego/label_names"])
    }
    assert dict(zip(s.obs["cameras/ego/label_ids"].tolist(), s.obs["cameras/ego/label_names"].tolist())) == seen


def test_merged_file_keeps_each_demo_s_own_instruction(house):
    root, truth = house
    (merged,) = root.glob("*_demo.hdf5")
    src = DemoSource(merged, "house_nav", cameras=("ego",))
    assert len(src.episodes()) == len(truth)
    for trial, ep in zip(sorted(truth), src.episodes()):
        s = src.sample(src.episode_range(ep)[0])
        assert s.obs["prompt"] == truth[trial]["instruction"]
        np.testing.assert_array_equal(s.obs["cameras/ego/rgb"], truth[trial]["obs"][0]["cameras/ego/rgb"])
    assert len({truth[k]["instruction"] for k in truth}) > 1  # trials of one scene have different targets


def test_shuffled_instructions_say_nothing_about_the_episode(house):
    """The language control (``data.instructions=shuffled``): each sample's prompt is one of the source's
    instructions drawn per sample, the same every time it is read, kept by a subset; everything else is
    the episode's own."""
    from vla.train.config import DataConfig

    root, truth = house
    (merged,) = root.glob("*_demo.hdf5")
    own = DemoSource(merged, "house_nav", cameras=("ego",))
    mixed = DemoSource(merged, "house_nav", cameras=("ego",), instructions="shuffled")
    texts = {truth[k]["instruction"] for k in truth}
    prompts = [mixed.sample(i).obs["prompt"] for i in range(len(mixed))]
    assert set(prompts) == texts  # every instruction drawn, nothing else
    for ep in mixed.episodes():  # within one episode the prompt is not the episode's: it varies
        assert len({prompts[i] for i in mixed.episode_range(ep)}) > 1
        wrong = sum(prompts[i] != own.sample(i).obs["prompt"] for i in mixed.episode_range(ep))
        assert wrong > 0
    assert [mixed.sample(i).obs["prompt"] for i in range(len(mixed))] == prompts  # deterministic
    first = mixed.episodes()[0]
    sub = mixed.subset({first})  # a subset draws from the whole source's instructions
    assert [sub.sample(i).obs["prompt"] for i in range(len(sub))] == [prompts[i] for i in mixed.episode_range(first)]
    a, b = own.sample(3), mixed.sample(3)
    np.testing.assert_array_equal(a.obs["cameras/ego/rgb"], b.obs["cameras/ego/rgb"])
    np.testing.assert_array_equal(a.actions, b.actions)
    with pytest.raises(ValueError, match="instructions must be one of"):
        DemoSource(merged, "house_nav", cameras=("ego",), instructions="swapped")
    with pytest.raises(ValueError, match="data.instructions must be"):
        DataConfig(paths=["x"], instructions="swapped")


def test_vla_data_s_selected_merge_is_the_recorder_s_merge_with_rounds(house, tmp_path):
    """``vla-data``'s merge of selected demos (any order, from several rounds) writes the files the
    recorder's merge writes: the demos in the order given, each with the round it came from."""
    from vla.data.generate import merge_selected

    root, truth = house
    files = sorted((root / ".episodes").glob("*.hdf5"))
    trials = [int(p.stem[-3:]) for p in files]
    assert len(files) == len(truth) >= 2
    (out,) = merge_selected({0: [(3, files[1]), (1, files[0])]}, {0: "picked"}, tmp_path / "hdf5")
    with h5py.File(out) as f, h5py.File(next(root.glob("*_demo.hdf5"))) as whole, h5py.File(files[1]) as first:
        data = f["data"]
        assert out.name == "picked_demo.hdf5" and data.attrs["num_demos"] == 2
        assert [data["demo_0"].attrs["round"], data["demo_1"].attrs["round"]] == [3, 1]
        assert data.attrs["total"] == len(truth[trials[1]]["actions"]) + len(truth[trials[0]]["actions"])
        assert data.attrs["language_instruction"] == first["data"].attrs["language_instruction"]
        np.testing.assert_array_equal(data["demo_0/actions"][:], truth[trials[1]]["actions"])
        np.testing.assert_array_equal(data["demo_1/actions"][:], whole["data/demo_0/actions"][:])
    assert not list((tmp_path / "hdf5").glob("*.tmp"))


def test_official_libero_layout(official):
    path, arrays = official
    src = DemoSource(path, "libero_spatial", chunk=2, cameras=("agentview", "wrist"))
    assert src.episodes() == [f"{path.stem}/demo_{i}" for i in range(3)] and len(src) == sum(T_OFFICIAL)
    s = src.sample(T_OFFICIAL[0] + 6)  # demo_1, its last step
    a = arrays["demo_1"]
    # the benchmark's instruction (from the task name), as the env says it at evaluation
    assert s.obs["prompt"] == "pick up the black bowl between the plate and the ramekin and place it on the plate"
    # official files store the raw OpenGL buffer: delivered in the protocol's orientation, turned once
    np.testing.assert_array_equal(s.obs["cameras/agentview/rgb"], a["obs/agentview_rgb"][6][::-1, ::-1])
    np.testing.assert_array_equal(s.obs["cameras/wrist/rgb"], a["obs/eye_in_hand_rgb"][6][::-1, ::-1])
    np.testing.assert_array_equal(s.obs["state"], np.concatenate([a["obs/ee_states"][6], a["obs/gripper_states"][6]]))
    assert s.obs["state"].dtype == np.float32 and s.obs["step"] == 6
    np.testing.assert_array_equal(s.obs["sensors/robot_state"], a["robot_states"][6])
    np.testing.assert_array_equal(s.obs["sensors/joint_states"], a["obs/joint_states"][6])
    np.testing.assert_array_equal(s.actions, a["actions"][[6, 6]])
    raw = DemoSource(path, "libero_spatial", orientation=None).sample(0)
    np.testing.assert_array_equal(raw.obs["cameras/agentview/rgb"], arrays["demo_0"]["obs/agentview_rgb"][0])
    up = DemoSource(path, "libero_spatial", orientation="upright").sample(0)
    np.testing.assert_array_equal(up.obs["cameras/agentview/rgb"], arrays["demo_0"]["obs/agentview_rgb"][0][::-1])
    spec = src.spec(src.episodes()[0])
    assert spec.family == "libero" and spec.action.dim == 7 and spec.info["orientation"] == "rot180"


def test_the_default_dataset_key_is_the_env_family(house, official, tmp_path):
    """``data.key`` unset (configs/data/libero.yaml sets none): the statistics key is the family."""
    root, _ = house
    assert DemoSource(official[0], None).key == "libero"
    assert DemoSource(root, None, cameras=("ego",)).key == "house"
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for f in [official[0], *sorted(Path(root).glob("*.hdf5"))[:1]]:
        (mixed / f.name).symlink_to(f)
    with pytest.raises(ValueError, match="several env families"):
        DemoSource(mixed, None, cameras=("ego",))


def test_libero_90_names_lose_their_scene_prefix(tmp_path):
    p = tmp_path / "KITCHEN_SCENE10_put_the_butter_at_the_back_of_the_stove_demo.hdf5"
    write_official(p, lengths=(2,))
    assert DemoSource(p, "libero_90").sample(0).obs["prompt"] == "put the butter at the back of the stove"


def test_orientation_turns_images_and_intrinsics_together(tmp_path):
    """A recorded LIBERO file (protocol images, K with fx < 0) delivered upright: a world point lands
    on the pixel the flip moves it to, and that pixel holds the same colour."""
    path = tmp_path / "rec_demo.hdf5"
    arrays = write_official(path, lengths=(3,), hw=(8, 6))
    h, w = 8, 6
    K = np.array([[-5.0, 0, (w - 1) / 2 + 0.3], [0, 5.0, (h - 1) / 2 - 0.2], [0, 0, 1]])
    with h5py.File(path, "a") as f:
        f["data"].attrs["image_orientation"] = "rot180"
        f["data"].attrs["language_instruction"] = "do it"
        obs = f["data/demo_0/obs"]
        obs["agentview_depth"] = np.ones((3, h, w), np.float32)
        obs["agentview_K"] = np.broadcast_to(K, (3, 3, 3)).copy()
        obs["agentview_T_world_cam"] = np.broadcast_to(np.eye(4), (3, 4, 4)).copy()
        obs["state"] = np.zeros((3, 8), np.float32)
    fields = ("rgb", "depth", "K", "T_world_cam")
    stored = DemoSource(path, "x", camera_fields=fields).sample(1).obs  # rot180 stays rot180: untouched
    np.testing.assert_array_equal(stored["cameras/agentview/rgb"], arrays["demo_0"]["obs/agentview_rgb"][1])
    np.testing.assert_array_equal(stored["cameras/agentview/K"], K)
    assert stored["prompt"] == "do it"
    up = DemoSource(path, "x", camera_fields=fields, orientation="upright").sample(1).obs
    K_up = up["cameras/agentview/K"]
    assert K_up[0, 0] > 0 and K_up[1, 1] == K[1, 1]
    p_cam = np.array([0.7, -0.4, 2.0])
    u, v = (K @ p_cam)[:2] / p_cam[2]
    u_up, v_up = (K_up @ p_cam)[:2] / p_cam[2]
    assert np.isclose(u_up, w - 1 - u) and np.isclose(v_up, v)
    img, img_up = stored["cameras/agentview/rgb"], up["cameras/agentview/rgb"]
    for r in range(h):
        for c in range(w):
            np.testing.assert_array_equal(img_up[r, w - 1 - c], img[r, c])


def test_sources_pickle_and_fork(house, official):
    root, _ = house
    src = DemoSource(root, "house_nav", cameras=("ego",))
    first = [src.sample(i) for i in (0, 5, len(src) - 1)]  # the parent has open handles now
    clone = pickle.loads(pickle.dumps(src))
    with mp.get_context("fork").Pool(2) as pool:
        forked = pool.map(src.sample, [0, 5, len(src) - 1])
    for a, b, c in zip(first, [clone.sample(i) for i in (0, 5, len(src) - 1)], forked):
        for other in (b, c):
            assert other.episode == a.episode and other.obs["step"] == a.obs["step"]
            np.testing.assert_array_equal(other.obs["cameras/ego/rgb"], a.obs["cameras/ego/rgb"])
            np.testing.assert_array_equal(other.actions, a.actions)


# ================================================================================== bad files
def test_bad_files_name_the_file_the_episode_and_the_key(tmp_path, house):
    root, _ = house
    short = tmp_path / "short_demo.hdf5"
    write_official(short, corrupt="short_rgb")
    with pytest.raises(ValueError, match=r"short_demo\.hdf5: demo_1: obs/agentview_rgb has 6 frames but actions has 7"):
        DemoSource(short, "x")
    nan = tmp_path / "nan_demo.hdf5"
    write_official(nan, corrupt="nan")
    with pytest.raises(ValueError, match=r"nan_demo\.hdf5: demo_2: actions contains NaN or inf at step 2"):
        DemoSource(nan, "x")
    # truncated: half of a recorded episode file
    src_file = next((root / ".episodes").glob("*.hdf5"))
    cut = tmp_path / "cut.hdf5"
    data = src_file.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.hdf5: not a readable HDF5 file"):
        DemoSource(cut, "x", cameras=("ego",))
    # not a demonstration file
    other = tmp_path / "other.hdf5"
    with h5py.File(other, "w") as f:
        f["x"] = np.zeros(3)
    with pytest.raises(ValueError, match=r"other\.hdf5: no 'data' group"):
        DemoSource(other, "x")
    # a camera the file does not have; metric fields an official file does not have
    with pytest.raises(ValueError, match=r"demo_0: obs/agentview_rgb is missing: this episode has cameras \['ego'\]"):
        DemoSource(src_file, "x")
    good = tmp_path / "good_demo.hdf5"
    write_official(good)
    with pytest.raises(ValueError, match=r"good_demo\.hdf5: demo_0: obs/agentview_depth is missing \(official LIBERO"):
        DemoSource(good, "x", camera_fields=("rgb", "depth"))
    with pytest.raises(ValueError, match=r"demo_0: obs/agentview_depth is missing: the memory needs it"):
        DemoSource(good, "x", memory=MemoryCache(tmp_path / "cache", MEMORY))
    # one source, one action space
    with pytest.raises(ValueError, match=r"actions has 3 dimensions but .*good_demo\.hdf5: demo_0: actions has 7"):
        DemoSource([good, src_file], "x")
    # no instruction anywhere
    bare = tmp_path / "bare.hdf5"
    shutil.copy(src_file, bare)
    with h5py.File(bare, "a") as f:
        del f["data"].attrs["language_instruction"]
        del f["data/demo_0"].attrs["language_instruction"]
    with pytest.raises(ValueError, match=r"bare\.hdf5: no language instruction"):
        DemoSource(bare, "x", cameras=("ego",))
    with pytest.raises(ValueError, match="no such file or directory"):
        DemoSource(tmp_path / "missing", "x")
    # a dataset damaged after indexing: the read names file, episode and key
    broken = tmp_path / "broken_demo.hdf5"
    write_official(broken)
    src = DemoSource(broken, "x")
    with h5py.File(broken, "a") as f:
        del f["data/demo_0/obs/agentview_rgb"]
    with pytest.raises(ValueError, match=r"broken_demo\.hdf5: demo_0: obs/agentview_rgb is missing"):
        src.sample(0)


# ================================================================================== memory cache
def test_memory_cache_is_what_the_transform_gave_live(tmp_path, house):
    root, truth = house
    cache = MemoryCache(tmp_path / "cache", MEMORY)
    src = DemoSource(root, "house_nav", cameras=("ego",), memory=cache)
    stats = src.build_memory(progress=False)
    assert stats["built"] == len(truth) and stats["frames"] == len(src)
    for trial, t in truth.items():
        for step, i in enumerate(src.episode_range(episode_id(trial))):
            obs = src.sample(i).obs
            live = t["memory"][step]
            got = {k[len("memory/") :]: v for k, v in obs.items() if k.startswith("memory/")}
            assert sorted(got) == sorted(live)
            for k, v in live.items():
                if isinstance(v, np.ndarray):
                    np.testing.assert_array_equal(got[k], v, err_msg=f"{trial} {step} {k}")
                    assert got[k].dtype.kind == v.dtype.kind
                else:
                    assert got[k] == v and type(got[k]) is type(v), (trial, step, k)
    assert got["frames"] == len(t["actions"])  # the last step has fused every frame of its episode
    kinds = [k for t in truth.values() for m in t["memory"] for k in m["routes/kind"]]
    assert "target" in kinds and "frontier" in kinds  # the routes were there to compare, of both kinds
    assert "; routes: " in got["text"]


def test_memory_cache_invalidation_and_resume(tmp_path, house):
    root, truth = house
    demos = tmp_path / "demos"
    shutil.copytree(root / ".episodes", demos)
    cache = MemoryCache(tmp_path / "cache", MemoryInputsConfig(inputs=("objects",)))
    src = DemoSource(demos, "house_nav", cameras=("ego",), memory=cache)
    refs = src.episode_refs()
    first = cache.build(src, progress=False)
    assert first["built"] == len(refs) and cache.build(src, progress=False)["skipped"] == len(refs)
    # lazily on first access, and resumable: a lost cache file is rebuilt, alone
    cache.path(refs[0]).unlink()
    assert cache.build(src, progress=False)["built"] == 1
    cache.path(refs[0]).unlink()
    assert "memory/objects/id" in src.sample(0).obs and cache.has(refs[0])
    # a changed memory config is a different cache
    other = MemoryCache(tmp_path / "cache", MemoryInputsConfig(inputs=("objects",), max_objects=2))
    assert all(other.path(r) != cache.path(r) and not other.has(r) for r in refs)
    s2 = DemoSource(demos, "house_nav", cameras=("ego",), memory=other).sample(len(src) - 1)
    assert len(s2.obs["memory/objects/id"]) <= 2 < len(src.sample(len(src) - 1).obs["memory/objects/id"])
    # a changed source file (here only its mtime) invalidates its episode
    p = Path(refs[1].path)
    os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 10**9))
    src3 = DemoSource(demos, "house_nav", cameras=("ego",), memory=MemoryCache(tmp_path / "cache", cache.config))
    stats = src3.memory.build(src3, progress=False)
    assert stats["built"] == 1 and stats["skipped"] == len(refs) - 1
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]  # no temporary files left


def test_a_memory_cache_file_of_another_identity_is_built_again_not_read(tmp_path, house):
    """A cache file under an episode's name whose stored identity is another's (copied from a cache of
    another config, or left by an older format) is never served: the episode is built again."""
    root, _ = house
    full = MemoryCache(tmp_path / "cache", MemoryInputsConfig(inputs=("objects",)))
    one = MemoryCache(tmp_path / "cache", MemoryInputsConfig(inputs=("objects",), max_objects=1))
    src = DemoSource(root, "house_nav", cameras=("ego",), memory=full)
    ref = src.episode_refs()[-1]
    one.build_episode(ref)
    shutil.copyfile(one.path(ref), full.path(ref))  # one object per step, under the full table's name
    assert len(src.sample(len(src) - 1).obs["memory/objects/id"]) > 1


# ================================================================================== splits and mixtures
def test_split_never_shares_an_episode(house, official):
    ids = [f"ep{i}" for i in range(200)]
    train, val = split_episodes(ids, 0.2, seed=3)
    assert not set(train) & set(val) and sorted(train + val) == sorted(ids)
    assert 20 <= len(val) <= 60 and split_episodes(ids, 0.2, seed=3) == (train, val)
    assert split_episodes(ids, 0.2, seed=4) != (train, val)
    more_train, more_val = split_episodes(ids + [f"new{i}" for i in range(50)], 0.2, seed=3)
    assert set(val) <= set(more_val) and set(train) <= set(more_train)  # adding episodes moves none
    assert len(split_episodes(["a", "b"], 0.01, seed=0)[1]) == 1 and split_episodes(["a", "b"], 0.0, 0)[1] == []
    assert len(split_episodes(["a", "b"], 0.99, seed=0)[0]) == 1
    path, _ = official
    src = DemoSource(path, "libero_spatial", chunk=2)
    tr, va = split_by_episode(src, 0.34, seed=0)
    assert set(tr.episodes()).isdisjoint(va.episodes()) and len(va.episodes()) >= 1
    assert sorted(tr.episodes() + va.episodes()) == sorted(src.episodes()) and len(tr) + len(va) == len(src)
    for part in (tr, va):
        for i in range(len(part)):
            s = part.sample(i)
            ref = src.sample(src.episode_range(s.episode)[s.obs["step"]])
            np.testing.assert_array_equal(s.actions, ref.actions)
            np.testing.assert_array_equal(s.obs["cameras/agentview/rgb"], ref.obs["cameras/agentview/rgb"])


def test_mixture_is_a_pure_function_of_step_and_seed(house, official, gst):
    root, _ = house
    sources = [DemoSource(root, "house_nav", cameras=("ego",)), DemoSource(official[0], "libero"), GSTQASource(gst)]
    mix = Mixture(sources, [2.0, 1.0, 1.0])
    a = mix.sample_indices(step=17, batch_size=64, seed=5)
    again = Mixture(sources, [2.0, 1.0, 1.0]).sample_indices(step=17, batch_size=64, seed=5)  # a resumed run
    assert a == again and a != mix.sample_indices(step=18, batch_size=64, seed=5)
    assert a != mix.sample_indices(step=17, batch_size=64, seed=6)
    assert all(0 <= i < len(sources[s]) for s, i in a)
    draws = [s for step in range(200) for s, _ in mix.sample_indices(step, 100, seed=1)]
    share = np.bincount(draws, minlength=3) / len(draws)
    np.testing.assert_allclose(share, [0.5, 0.25, 0.25], atol=0.02)
    batch = mix.batch(step=3, batch_size=4, seed=1)
    assert [b.dataset for b in batch] == [sources[s].key for s, _ in mix.sample_indices(3, 4, 1)]
    with pytest.raises(ValueError, match="one weight per source"):
        Mixture(sources, [1.0])
    with pytest.raises(ValueError, match="not all 0"):
        Mixture(sources, [0, 0, 0])


def test_sample_checks_itself():
    with pytest.raises(ValueError, match="2 <image> markers but there are 1 images"):
        Sample("d", "e", "qa", images=[np.zeros((2, 2, 3), np.uint8)], prompt="<image><image>", answer="x")
    with pytest.raises(ValueError, match="kind"):
        Sample("d", "e", "video")


@pytest.mark.slow
def test_recorded_libero_episode_and_its_tabletop_memory(tmp_path):
    """A real LIBERO episode (scripted expert, 32 px, agentview) recorded by the DemoRecorder: samples
    are the env's observations in the protocol orientation, and the memory cache (tabletop scale,
    chosen from the recorded EnvSpec) equals the transform run live."""
    cfg = {"name": "libero", "suite": "libero_object", "resolution": 32, "cameras": ["agentview"]}
    root, truth = tmp_path / "demos", Truth(MEMORY)
    env, agent = make_env(cfg, 0), make_agent({"name": "scripted"})
    try:
        key = {"env": "libero", "suite": "libero_object", "task_id": 0, "task": env.task.name, "trial": 0}
        result = run_episode(env, agent, key, [DemoRecorder(root), truth], seed=7)
        env_spec = env.env_spec
    finally:
        env.close()
    assert result.success, result.error
    t = truth.episodes[0]
    cache = MemoryCache(tmp_path / "cache", MEMORY)
    src = DemoSource(root, "libero_object", chunk=4, memory=cache, camera_fields=("rgb", "depth", "K", "T_world_cam"))
    (ep,) = src.episodes()
    assert src.spec(ep).to_dict() == env_spec.to_dict() and src.spec(ep).info["orientation"] == "rot180"
    n = len(t["actions"])
    assert len(src) == n
    for step in range(n):
        s, rec = src.sample(step), t["obs"][step]
        assert s.obs["prompt"] == env_spec.task["instruction"] == rec["prompt"]
        for k in ("state", "cameras/agentview/rgb", "cameras/agentview/K", "sensors/ee_states", "sensors/robot_state"):
            np.testing.assert_array_equal(s.obs[k], rec[k], err_msg=k)
        np.testing.assert_array_equal(s.actions, t["actions"][np.minimum(np.arange(step, step + 4), n - 1)])
        live = t["memory"][step]
        for k, v in live.items():
            got = s.obs[f"memory/{k}"]
            if isinstance(v, np.ndarray):
                np.testing.assert_array_equal(got, v, err_msg=f"{step} {k}")
            else:
                assert got == v, (step, k)
    # the live transform was reset with the env's spec (an arm: the tabletop memory); equal entries
    # mean the cache chose the same scale from the file's spec


def test_a_memory_of_frames_reads_from_the_demonstration_what_a_live_episode_keeps(house):
    """DemoSource(frames=(K, camera)) gives each sample the frames FrameMemory keeps live at that step: the
    first frame and K-1 more evenly spaced before it, read from the recording."""
    from envs.observation import Observation
    from vla.transforms.frame_memory import FrameMemory, frame_keys, frame_steps

    assert frame_steps(0, 3) == [0, 0, 0] and frame_steps(10, 4) == [0, 2, 5, 7] and frame_steps(2, 3) == [0, 0, 1]
    root, truth = house
    src = DemoSource(root, "house_nav", cameras=("ego",), frames=(3, "ego"))
    for trial, t in truth.items():
        live = FrameMemory(3, "ego")
        for step, i in enumerate(src.episode_range(episode_id(trial))):
            kept = live(Observation.from_dict(t["obs"][step])).memory
            obs = src.sample(i).obs
            for j, key in enumerate(frame_keys(3)):
                np.testing.assert_array_equal(obs[key], kept[key[len("memory/") :]])
                np.testing.assert_array_equal(obs[key], t["obs"][frame_steps(step, 3)[j]]["cameras/ego/rgb"])
    sub = src.subset({episode_id(next(iter(truth)))})
    assert sub.frames == (3, "ego") and "memory/frames/2" in sub.sample(len(sub) - 1).obs
    with pytest.raises(ValueError, match="one of the source's cameras"):
        DemoSource(root, "house_nav", cameras=("ego",), frames=(2, "wrist"))
    first = Observation.from_dict(truth[next(iter(truth))]["obs"][0])
    live = FrameMemory(2, "ego")
    live(first)
    with pytest.raises(RuntimeError, match="needs every frame"):
        live(first)  # step 0 again: a frame was not seen in order


def test_the_sample_pools_files_keep_no_chunk_cache_that_would_grow_with_every_frame_read(tmp_path):
    """Training reads random frames, one chunk each: h5py's 8 MiB chunk cache per open dataset only grows
    (to 9.4 GB in a loader worker over a suite's recording). The pool opens its files without one; a file
    opened for anything else keeps h5py's default."""
    from vla.data.handles import HandlePool, open_hdf5

    path = tmp_path / "frames.hdf5"
    with h5py.File(path, "w") as f:
        f.create_dataset("rgb", data=np.zeros((4, 8, 8, 3), np.uint8), chunks=(1, 8, 8, 3))
    pool = HandlePool()
    assert pool.dataset(str(path), "rgb")[2].shape == (8, 8, 3)
    assert pool.file(str(path)).id.get_access_plist().get_cache()[2] == 0
    pool.close()  # (HDF5 shares an open file's settings with a second open of it)
    with open_hdf5(str(path)) as f:
        assert f.id.get_access_plist().get_cache()[2] == 8 * 1024 * 1024
