"""analyses/drift_error.py: the pose errors it reports, and its overrides reaching the memory."""

import numpy as np
import pytest

from spatial_memory.geometry import pose_from_xy_yaw
from tests.conftest import load_script


def _script():
    return load_script("drift_error")


def test_pose_errors_are_floor_distance_and_wrapped_heading():
    s = _script()
    true = np.array([pose_from_xy_yaw(1.0, 2.0, np.radians(179.0), 1.5, np.radians(10))])
    est = np.array([pose_from_xy_yaw(1.3, 2.4, np.radians(-178.0), 1.2, np.radians(10))])
    d, yaw = s.pose_errors(est, true)
    assert d[0] == pytest.approx(0.5)  # the height is not counted
    assert yaw[0] == pytest.approx(3.0)  # across +-180


def test_overrides_reach_the_drift_settings_and_only_val_seeds_run():
    s = _script()
    cfg = s.memory_config("harsh", {"drift.reloc_every": 1, "drift.reloc_gain": 0.2})
    assert cfg.drift.reloc_every == 1 and cfg.drift.reloc_gain == 0.2
    assert cfg.drift.odom_sigma_deg == s.memory_config("harsh", {}).drift.odom_sigma_deg  # the rest kept
    with pytest.raises(SystemExit):
        s.main(["--first", "900000", "--scenes", "1"])
    with pytest.raises(SystemExit):
        s.main(["--set", "cell=0.2"])
