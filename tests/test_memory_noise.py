"""The synthetic noise sweep (scripts/noise_sweep.py): answers degrade gracefully with depth noise and
odometry drift."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from noise_sweep import NoiseModel, angle_macc, evaluate, mra, render_tour  # noqa: E402


@pytest.fixture(scope="module")
def tour():
    return render_tour(n_frames=35, size=48)


def test_metrics_follow_gst_definitions():
    assert angle_macc([0, 20, 40, 90], [0, 0, 0, 0]) == pytest.approx(100 * np.mean([1 / 4, 2 / 4, 3 / 4]))
    assert angle_macc([179], [-179]) == 100.0  # errors wrap around
    assert mra([1.0], [1.0]) == 100.0
    assert mra([1.3], [1.0]) == pytest.approx(100 * 4 / 10)  # 0.3 < 1 - t for t in {0.50..0.65}


def test_stream_corrupts_depth_and_drifts_pose(tour):
    _, frames = tour
    stream = NoiseModel(depth_sigma=0.01, depth_dropout=0.1, pose_drift_m=0.02, pose_drift_deg=0.5, seed=3).stream()
    noisy = [stream(f) for f in frames[:10]]
    assert 0.05 < (noisy[0].depth == 0).mean() - (frames[0].depth == 0).mean() < 0.15
    assert not np.allclose(noisy[-1].T_world_cam, frames[9].T_world_cam)
    assert np.isclose(noisy[-1].T_world_cam[2, 3], frames[9].T_world_cam[2, 3])  # drift stays in the floor plane
    clean = NoiseModel().stream()
    np.testing.assert_array_equal(clean(frames[0]).depth, frames[0].depth)
    with pytest.raises(ValueError):
        NoiseModel(depth_dropout=1.0)


def test_graceful_degradation(tour):
    scene, frames = tour
    clean = evaluate(NoiseModel(), scene, frames)
    assert clean["objects_found"] == len(scene.objects())
    assert clean["angle_mAcc"] == 100.0 and clean["distance_MRA"] > 95
    assert clean["agent_pos_err_m"] == 0.0
    mild = evaluate(
        NoiseModel(depth_sigma=0.005, depth_dropout=0.02, pose_drift_m=0.005, pose_drift_deg=0.1, seed=1), scene, frames
    )
    assert mild["objects_found"] == len(scene.objects())
    assert mild["angle_mAcc"] >= 90 and mild["distance_MRA"] >= 80
    harsh = evaluate(
        NoiseModel(depth_sigma=0.03, depth_dropout=0.1, pose_drift_m=0.03, pose_drift_deg=0.5, seed=1), scene, frames
    )
    assert harsh["center_err_mean_m"] > mild["center_err_mean_m"] > clean["center_err_mean_m"] * 0.9
    assert harsh["objects_found"] >= len(scene.objects()) - 1  # degraded, not broken
