"""analyses/drift_prior_sweep.py: the scaled drift prior reaches the memory the GST answerer builds."""

import pytest

from spatial_memory.profiles import MEMORY_SETTINGS
from tests.conftest import load_script
from vla.agents import make_agent
from vla.config import compose


def _script():
    return load_script("drift_prior_sweep")


@pytest.mark.parametrize("profile,scale", [("harsh", 2.0), ("realistic", 0.5)])
def test_the_override_the_sweep_passes_is_the_prior_the_offline_answerer_fuses_with(profile, scale):
    s = _script()
    drift = s._flow(s.drift_prior(profile, scale))
    cfg = compose("gst", ["agent=memory", f"perception={profile}", f"+agent.memory_overrides.drift={drift}"])
    agent = make_agent(dict(cfg["agent"]), seed=0)
    memory = agent.memory_answers.answerer()._new_memory()  # what an offline question's stream is fused into
    spec = MEMORY_SETTINGS[profile]["drift"]
    drift = memory.config.drift
    for key in s.SCALED:
        assert getattr(drift, key) == pytest.approx(spec[key] * scale)
    assert drift.cell == spec["cell"] and list(drift.depth_sigma) == spec["depth_sigma"]  # only the prior moves
    # the rest of the profile's memory stays (frame-local ids: association by proximity)
    assert memory.config.association == MEMORY_SETTINGS[profile]["association"]


def test_a_profile_without_drift_correction_or_a_bad_scale_is_refused():
    s = _script()
    with pytest.raises(ValueError, match="no drift correction"):
        s.drift_prior("gt", 2.0)
    with pytest.raises(ValueError, match="> 0"):
        s.drift_prior("realistic", 0.0)
