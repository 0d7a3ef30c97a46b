"""The learned detector (spatial_memory/detector.py) and the ``learned`` perception profile: checkpoints
and their metadata, the refusal of a checkpoint that does not fit, instances by connected components,
and the profile through the paths the other profiles take (memory, robot sensors, question media,
configs, the memory agent)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spatial_memory import SpatialMemory
from spatial_memory.detector import (
    DetectorSpec,
    SegNet,
    instances_from_probs,
    load_detector,
    read_checkpoint,
    save_checkpoint,
)
from spatial_memory.frame import CameraFrame
from spatial_memory.geometry import pose_from_xy_yaw
from spatial_memory.perception import PerceptionProfile
from spatial_memory.profiles import PROFILES, memory_config_for, profile
from spatial_memory.synthetic import apartment_scene, default_camera

CATS = ("bed", "sofa", "table")


def constant_detector(path, category: str, categories=CATS, frame_size=(48, 48), input_size=(16, 16)):
    """A checkpoint whose network calls every pixel ``category`` (its head ignores the features): a detector
    with known output, for the plumbing; what a trained one finds is measured by ``python -m vla.detector eval``."""
    spec = DetectorSpec(
        categories=tuple(categories), frame_size=frame_size, input_size=input_size, widths=(4, 8), min_pixels=5
    )
    torch.manual_seed(0)
    net = SegNet(spec)
    with torch.no_grad():
        net.head.weight.zero_()
        net.head.bias.fill_(-5.0)
        net.head.bias[spec.categories.index(category) + 1] = 5.0
    save_checkpoint(path, spec, net, {"note": "constant"})
    return path


@pytest.fixture(scope="module")
def frames():
    scene = apartment_scene()
    K = default_camera(48, 48)
    poses = [pose_from_xy_yaw(2.5 + 0.2 * k, 2.2, 0.5, 1.5) for k in range(6)]
    return [scene.render(T, K, 48, 48, step=k) for k, T in enumerate(poses)]


def test_checkpoint_round_trips_with_its_metadata(tmp_path):
    spec = DetectorSpec(categories=CATS, frame_size=(64, 48), input_size=(32, 16), widths=(4, 8), score_threshold=0.4)
    net = SegNet(spec)
    save_checkpoint(tmp_path / "d.pt", spec, net, {"state": "x"})
    assert read_checkpoint(tmp_path / "d.pt")["state"] == "x"
    det = load_detector(tmp_path / "d.pt", categories=tuple(reversed(CATS)), frame_size=(64, 48))
    assert det.spec == spec and det.spec.categories == CATS  # the order is the checkpoint's
    rgb = np.random.default_rng(0).integers(0, 255, (64, 48, 3), dtype=np.uint8)
    depth = np.full((64, 48), 2.0, np.float32)
    with torch.no_grad():
        net.eval()
    assert np.allclose(det.probs(rgb, depth), load_detector(tmp_path / "d.pt").probs(rgb, depth))
    assert det.probs(rgb, depth).shape == (4, 64, 48)


def test_a_checkpoint_that_does_not_fit_is_refused_naming_the_mismatch(tmp_path, frames):
    path = constant_detector(tmp_path / "d.pt", "sofa")
    with pytest.raises(ValueError, match=r"another category set.*not in the checkpoint: \['lamp'\].*only in the "):
        load_detector(path, categories=("bed", "sofa", "lamp"))
    with pytest.raises(ValueError, match="frames are 256x256 but the checkpoint was trained for 48x48 frames"):
        load_detector(path, frame_size=(256, 256))
    # through a profile: the stream's category set, then a frame of another size
    p = profile({"name": "learned", "checkpoint": str(path)})
    from spatial_memory.perception import CategoryModel

    with pytest.raises(ValueError, match=r"another category set.*\['armchair'\]"):
        p.stream("scene", CategoryModel.from_groups([("sofa", "armchair")], CATS))
    big = apartment_scene().render(pose_from_xy_yaw(2.5, 2.2, 0.5, 1.5), default_camera(32, 32), 32, 32)
    with pytest.raises(ValueError, match="frames are 32x32 but the checkpoint was trained for 48x48"):
        p.stream("scene")(big)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read"):
        load_detector(tmp_path / "junk.pt")
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a detector checkpoint"):
        load_detector(tmp_path / "other.pt")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_detector(tmp_path / "missing.pt")


def test_connected_components_split_two_objects_of_one_category():
    probs = np.zeros((3, 20, 30), np.float32)
    probs[0] = 1.0
    probs[:, 2:8, 2:10] = np.array([0.1, 0.9, 0.0])[:, None, None]  # two sofas (class 1), apart
    probs[:, 10:18, 15:28] = np.array([0.2, 0.8, 0.0])[:, None, None]
    probs[:, 2:8, 20:28] = np.array([0.0, 0.3, 0.7])[:, None, None]  # a table
    det = instances_from_probs(probs, ("sofa", "table"), min_pixels=10, score_threshold=0.5)
    assert sorted(det.labels.values()) == ["sofa", "sofa", "table"]
    assert sorted(round(s, 2) for s in det.scores.values()) == [0.7, 0.8, 0.9]
    sofa_ids = [i for i, c in det.labels.items() if c == "sofa"]
    assert {int((det.instance == i).sum()) for i in sofa_ids} == {48, 104}
    # two sofas touching in the image, at different ranges: one component without depth, two with it
    probs = np.zeros((3, 20, 30), np.float32)
    probs[0] = 1.0
    probs[:, 4:16, 4:26] = np.array([0.1, 0.9, 0.0])[:, None, None]
    depth = np.full((20, 30), 4.0, np.float32)
    depth[:, 15:] = 2.0
    assert len(instances_from_probs(probs, ("sofa", "table"), min_pixels=10).labels) == 1
    split = instances_from_probs(probs, ("sofa", "table"), depth, min_pixels=10, depth_edge_rel=0.08)
    assert list(split.labels.values()) == ["sofa", "sofa"]
    # a low score or a small blob is dropped
    assert instances_from_probs(probs, ("sofa", "table"), score_threshold=0.95).labels == {}
    assert instances_from_probs(probs, ("sofa", "table"), min_pixels=1000).labels == {}


def test_learned_profile_composes_and_the_memory_integrates_its_detections(tmp_path, frames):
    path = str(constant_detector(tmp_path / "d.pt", "sofa"))
    with pytest.raises(ValueError, match="perception=learned needs its detector's checkpoint"):
        profile("learned")
    with pytest.raises(ValueError, match="perception.checkpoint is the learned detector's"):
        profile({"name": "realistic", "checkpoint": path})
    p = profile({"name": "learned", "checkpoint": path, "seed": 3})
    assert p.depth == PROFILES["realistic"].depth and p.odometry == PROFILES["realistic"].odometry
    assert p.detector is None and not p.exact and p.frame_local_ids
    assert PerceptionProfile.from_dict(p.to_dict()) == p
    assert memory_config_for("learned") == memory_config_for("realistic")
    stream = p.stream(("scene", "video"))
    # the simulator's masks are not used: the frames come without them
    seen = [stream(CameraFrame(f.rgb, f.depth, f.K, f.T_world_cam, step=f.step)) for f in frames]
    for f in seen:
        assert f.instance is not None and set(f.labels.values()) == {"sofa"}
        assert set(np.unique(f.instance)) - {0} == set(f.labels)
    ids = [set(f.labels) for f in seen]
    assert all(not (a & b) for a, b in zip(ids, ids[1:]))  # frame-local ids
    assert not np.allclose(seen[-1].T_world_cam, frames[-1].T_world_cam)  # realistic's odometry drifts
    mem = SpatialMemory(config=memory_config_for("learned"))
    for f in seen:
        mem.integrate(f)
    assert mem.objects() and {o.category for o in mem.objects()} == {"sofa"}


def house_detector(tmp_path) -> str:
    from envs.perception import categories

    return str(constant_detector(tmp_path / "d.pt", "sofa", categories=tuple(categories("house").vocabulary)))


def test_learned_profile_composes_in_the_rollout_gst_and_serve_configs(tmp_path):
    from envs.perception import perception_profile
    from vla.config import compose

    path = house_detector(tmp_path)
    for name in ("rollout", "gst"):
        cfg = compose(name, ["perception=learned", f"perception.checkpoint={path}", "agent=memory"])
        assert cfg["perception"]["checkpoint"] == path and cfg["agent"]["perception"] == "learned"
        assert perception_profile(cfg["perception"]).checkpoint == path
    with pytest.raises(ValueError, match="needs its detector's checkpoint"):
        perception_profile(compose("gst", ["perception=learned"])["perception"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        perception_profile({"name": "learned", "checkpoint": str(tmp_path / "missing.pt")})
    assert compose("serve", ["agent=memory", "agent.perception=learned"])["agent"]["perception"] == "learned"


def test_memory_agent_builds_for_learned_sensors():
    from vla.agents.map_agent import MemoryAgent

    agent = MemoryAgent(perception="learned")
    assert agent.navigator.config.min_obstacle_hits == 1


def test_learned_profile_through_robot_sensors_and_question_media(tmp_path, frames):
    from envs.observation import Observation
    from envs.perception import RobotSensors, perception_profile
    from envs.spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec
    from vla.gst.sensors import sensors_for

    p = perception_profile({"name": "learned", "checkpoint": house_detector(tmp_path)})
    # mid-episode questions and rollouts: the robot's sensors on an observation
    spec = EnvSpec(
        family="house",
        action=ActionSpec((-1, -1, -1), (1, 1, 1), ("forward_m", "left_m", "yaw_rad")),
        state=ArraySpec((3,), "float64", ("x_m", "y_m", "yaw_rad")),
        cameras=(CameraSpec("ego", 48, 48, depth=True, instance=True),),
    )
    obs = RobotSensors(p, ("house/val/1", 0), spec)(Observation({"ego": frames[0]}, np.zeros(3), "go", 0))
    assert set(obs.cameras["ego"].labels.values()) == {"sofa"}
    # offline questions: a stream and a current view
    media = sensors_for(p, "house")

    class Q:
        scene, media = "house/val/1", {"stream": "s.npz", "current_sensors": "c.npz"}

    stream = media(Q, "stream", frames)
    view = media(Q, "current_sensors", frames[0])
    assert all(set(f.labels.values()) == {"sofa"} for f in stream) and set(view.labels.values()) == {"sofa"}


@pytest.mark.slow  # ~1 min on a loaded machine
def test_training_a_few_steps_lowers_the_loss(frames):
    from vla.detector.data import semantic
    from vla.detector.train import Arrays, class_weights, loss_fn, train_steps

    cats = ("bed", "sofa", "table", "wardrobe", "plant", "tv_stand", "chair", "desk")
    spec = DetectorSpec(categories=cats, frame_size=(48, 48), input_size=(48, 48), widths=(8, 16))
    index = {c: k for k, c in enumerate(cats)}
    from spatial_memory.detector import frame_tensor

    x = frame_tensor(np.stack([f.rgb for f in frames[:2]]), np.stack([f.depth for f in frames[:2]]), spec)
    y = torch.from_numpy(np.stack([semantic(f, index) for f in frames[:2]]).astype(np.int64))
    assert len(torch.unique(y)) > 2  # background and objects
    data = Arrays(x, y)
    torch.manual_seed(0)
    net = SegNet(spec)
    w = class_weights(y, spec.num_classes)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    net.eval()
    with torch.no_grad():
        before = float(loss_fn(net, x, y, w))
    train_steps(net, opt, data, w, batch=2, gen=torch.Generator().manual_seed(0), limit=1)
    for _ in range(40):
        train_steps(net, opt, data, w, batch=2, gen=torch.Generator().manual_seed(0))
    net.eval()
    with torch.no_grad():
        after = float(loss_fn(net, x, y, w))
    assert after < 0.5 * before, (before, after)


def test_render_skips_an_apartment_without_an_episode_and_goes_on(tmp_path, capsys):
    """Train apartment 69 has no navigation target, so its env cannot reset into an episode: the render
    names it and writes nothing for it instead of ending the run (apartment 70 after it is rendered)."""
    from vla.detector.data import render

    written = render(tmp_path, "train", 69, 2, stride=64, progress=False)
    assert len(written) == 1 and written[0].exists() and not written[0].stem.endswith(".tmp")
    assert len(list((tmp_path / "train").glob("*.npz"))) == 1
    assert "skipped train apartment 69" in capsys.readouterr().err
