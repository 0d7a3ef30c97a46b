"""One strict ``from_dict`` for every config dataclass: unknown keys refused, naming the valid ones."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from vla_common.strict import check_keys, from_dict

# every config built from plain data (YAML, the command line, checkpoints, saved memories)
CONFIGS = [
    "envs.house.config:HouseConfig",
    "envs.libero.config:LiberoConfig",
    "envs.omnigibson.config:OmniGibsonConfig",
    "spatial_memory.memory_config:MemoryConfig",
    "spatial_memory.drift:DriftConfig",
    "vla.navigation.config:NavigatorConfig",
    "vla.transforms.map_inputs:MemoryInputsConfig",
    "vla.serve.config:ServeConfig",
    "vla.policy.backbone:ModelConfig",
    "vla.policy.config:PolicyConfig",
    "vla.policy.inputs:InputConfig",
    "vla.rollout.rerun_view:RerunOptions",
    "vla.gst.options:GSTOptions",
    "vla.train.config:TrainConfig",
    "vla.eval.backends.options:RayOptions",
]


@dataclasses.dataclass(frozen=True)
class Knobs:
    size: int = 3
    sides: tuple[str, ...] = ("a",)


def test_from_dict_builds_refuses_and_ignores():
    assert from_dict(Knobs, None, "knob") == Knobs()
    assert from_dict(Knobs, {"size": 5, "name": "x"}, "knob", ignore=("name",)) == Knobs(size=5)
    with pytest.raises(
        ValueError, match=r"^unknown knob option\(s\) \['colour', 'name'\]; valid options: \['sides', 'size'\]$"
    ):
        from_dict(Knobs, {"colour": 1, "name": "x"}, "knob")
    with pytest.raises(ValueError, match="knob options must be a map"):
        from_dict(Knobs, [("size", 5)], "knob")
    check_keys({"size": 1}, ["size"], "knob")
    with pytest.raises(ValueError, match=r"unknown eval option\(s\) \[3\]"):
        check_keys({3: 1}, ["size"], "eval")


@pytest.mark.parametrize("target", CONFIGS)
def test_every_config_refuses_an_unknown_key_naming_the_valid_ones(target):
    module, attr = target.split(":")
    cls = getattr(importlib.import_module(module), attr)
    valid = sorted(f.name for f in dataclasses.fields(cls))
    with pytest.raises(ValueError, match=r"unknown .*option\(s\) \['bogus'\]; valid options: ") as err:
        cls.from_dict({"bogus": 1})
    assert str(valid) in str(err.value)


def test_agents_refuse_unknown_options_the_same_way():
    from vla.agents import make_agent

    with pytest.raises(
        ValueError, match=r"unknown memory agent option\(s\) \['bogus'\]; valid options: \[.*'navigator'"
    ):
        make_agent({"name": "memory", "bogus": 1})
    with pytest.raises(ValueError, match=r"unknown dagger agent option\(s\) \['bogus'\]; valid options: \[.*'beta'"):
        make_agent({"name": "dagger", "bogus": 1})
