"""A proprio feature the memory computes is one entry of ``MEMORY_FEATURES`` (vla/transforms/map_inputs.py,
docs/ARCHITECTURE.md §11): the policy's input checks, its proprio vector, the memory groups it asks for
and training's proprio statistics all read that table -- no special case elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from vla.transforms import map_inputs as mem


@pytest.fixture
def heading(monkeypatch):
    """A made-up feature: the first object's bearing as (sin, cos), from the object table."""

    def compute(d):
        deg = float(np.asarray(d["memory/objects/bearing_deg"]).ravel()[0])
        return np.array([np.sin(np.radians(deg)), np.cos(np.radians(deg))], dtype=np.float32)

    feature = mem.MemoryFeature(compute, 2, ("objects",))
    monkeypatch.setitem(mem.MEMORY_FEATURES, "memory/heading", feature)
    return feature


def test_a_registered_feature_is_read_as_a_proprio_key(heading):
    from vla.policy.inputs import InputConfig, proprio_vector

    cfg = InputConfig(proprio="token", proprio_keys=("state", "memory/heading"))
    assert cfg.uses_memory and cfg.memory_features == ("memory/heading",)
    d = {"state": np.array([1.0, 2.0]), "memory/objects/bearing_deg": np.array([90.0])}
    np.testing.assert_allclose(proprio_vector(d, cfg.proprio_keys), [1.0, 2.0, 1.0, 0.0], atol=1e-6)
    with pytest.raises(ValueError, match="memory/nope"):
        InputConfig(proprio="token", proprio_keys=("memory/nope",))
    assert InputConfig(proprio="none", proprio_keys=("memory/heading",)).memory_features == ()


def test_a_registered_feature_asks_for_its_memory_groups(heading):
    from vla.policy.config import PolicyConfig
    from vla.policy.inputs import InputConfig

    pcfg = PolicyConfig(inputs=InputConfig(proprio="token", proprio_keys=("memory/heading",)))
    assert list(pcfg.with_memory(None, 112).memory.inputs) == ["objects"]


def test_training_passes_a_registered_feature_through_its_statistics(heading):
    from vla.train.data import proprio_statistics

    class Source:
        key = "demo"

        def __len__(self):
            return 3

        def states(self, keys):
            assert keys == ("state",), keys  # the feature is never read from the data
            return np.array([[0.0], [1.0], [2.0]])

    stats = proprio_statistics([Source()], ("state", "memory/heading"))["demo"]
    assert list(stats.mask) == [True, False, False]
    np.testing.assert_allclose(stats.q01[1:], [-1.0, -1.0]) and np.testing.assert_allclose(stats.q99[1:], [1.0, 1.0])
