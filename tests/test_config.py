"""One source of config defaults: the composed config is exactly the dataclasses' defaults plus overrides."""

from __future__ import annotations

import dataclasses

import pytest

from vla.config import compose


def _defaults(cls, exclude=()):
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        v = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def test_composed_groups_are_the_dataclass_defaults():
    from envs.house.config import HouseConfig
    from envs.libero.config import LiberoConfig
    from vla.eval.evaluate import EvalSpec
    from vla.gst.options import GSTOptions
    from vla.eval.backends.options import RayOptions
    from vla.rollout.rerun_view import RerunOptions

    cfg = compose("rollout", ["env=house"])
    assert cfg["env"] == {"name": "house", **HouseConfig().to_dict()}
    assert HouseConfig.from_dict(cfg["env"]) == HouseConfig()
    from vla.config import SCHEMAS

    assert cfg["eval"] == _defaults(EvalSpec, SCHEMAS[("eval", "default")][1])
    assert "record_keep" not in cfg["eval"] and cfg["record_keep"] == "success"  # a top-level key, like record
    assert cfg["gst"] == _defaults(GSTOptions)
    assert cfg["rerun"] == _defaults(RerunOptions)
    assert cfg["ray"] == _defaults(RayOptions) == compose("gst", [])["ray"]
    from envs.perception import PerceptionConfig

    assert cfg["perception"] == _defaults(PerceptionConfig)  # perception=gt
    cfg = compose("rollout", ["env=libero"])
    assert cfg["env"] == {"name": "libero", **LiberoConfig().to_dict()}
    assert LiberoConfig.from_dict(cfg["env"]) == LiberoConfig()


def test_overrides_reach_every_field_without_plus_and_unknown_keys_are_refused():
    from vla.navigation import NavigatorConfig

    cfg = compose(
        "rollout", ["env=house", "env.split=val", "agent=memory", "agent.navigator.unknown_cost=2.0", "gst.every=7"]
    )
    assert cfg["env"]["split"] == "val" and cfg["gst"]["every"] == 7
    nav = dict(cfg["agent"]["navigator"])
    assert NavigatorConfig.from_dict(nav).unknown_cost == 2.0
    assert set(nav) == {f.name for f in dataclasses.fields(NavigatorConfig)}  # every knob is printed by --cfg
    with pytest.raises(ValueError, match="env.bogus"):
        compose("rollout", ["env=house", "env.bogus=1"])
    with pytest.raises(ValueError, match="unknown house env option"):
        from envs.house.config import HouseConfig

        HouseConfig.from_dict({**compose("rollout", ["env=house", "+env.bogus=1"])["env"]})


def test_serve_remote_and_openpi_defaults_live_in_their_dataclasses_only(capsys):
    """configs/serve.yaml, agent/remote.yaml and agent/openpi.yaml name groups and schemas, no option;
    the composed config is the dataclasses' defaults, and ``vla-serve --cfg`` shows every option."""
    import json

    from omegaconf import OmegaConf

    from vla.agents.openpi import OpenpiAgentOptions
    from vla.agents.remote import RemoteAgentOptions
    from vla.config import CONFIG_DIR
    from vla.serve.cli import serve_main
    from vla.serve.config import ServeOptions

    for name in ("serve.yaml", "agent/remote.yaml", "agent/openpi.yaml"):
        assert set(OmegaConf.load(CONFIG_DIR / name)) <= {"defaults", "name"}, name
    cfg = compose("serve", [])
    assert {k: v for k, v in cfg.items() if k != "agent"} == _defaults(ServeOptions)
    assert compose("rollout", ["agent=remote"])["agent"] == {"name": "remote", **_defaults(RemoteAgentOptions)}
    assert compose("rollout", ["agent=openpi"])["agent"] == {"name": "openpi", **_defaults(OpenpiAgentOptions)}
    assert serve_main(["--cfg", "port=9", "memory={inputs: [objects]}"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert set(shown) == {f.name for f in dataclasses.fields(ServeOptions)} | {"agent"}
    assert shown["port"] == 9 and shown["memory"] == {"inputs": ["objects"]} and shown["agent"]["name"] == "memory"
    with pytest.raises(ValueError, match="bogus"):
        compose("serve", ["bogus=1"])
    with pytest.raises(ValueError, match=r"unknown remote agent option\(s\) \['bogus'\]"):
        from vla.agents import make_agent

        make_agent({"name": "remote", "bogus": 1})


FACTORS = ["camera", "robot", "language", "light", "texture", "noise", "layout", "0-3"]
PROFILES = ["gt", "realistic", "harsh", "learned"]


@pytest.mark.parametrize(
    "args, allowed",
    [
        (["env=libero", "env.perturb=camera:9"], FACTORS),
        (["env=libero", "env.perturb=fog:1"], FACTORS),
        (["env=libero", "env.perturb=camera:2+light:x"], FACTORS),
        (["env=house", "perception=foo"], PROFILES),
        (["env=house", "perception.name=foo"], PROFILES),
        (["env=house", "agent=memory", "agent.perception=foo"], PROFILES),
        (["env=house", "agent=memory", "agent.answer_from=frames"], ["'memory' or 'frame'"]),
    ],
)
def test_a_bad_choice_fails_at_config_time_naming_what_is_allowed(args, allowed, tmp_path, monkeypatch, capsys):
    """``vla-rollout --cfg`` and a run refuse a bad factor or level of ``env.perturb``, an unknown
    perception profile (the group, ``perception.name``, ``agent.perception``) and a bad choice of an
    agent's options with one line that names the allowed values -- before any env, agent or worker is
    built (evaluate is never reached), where a bad one used to pass ``--cfg``, fail in a worker, or
    name nothing."""
    import vla.eval.evaluate
    from vla.cli.rollout import main

    def reached(*a, **k):
        raise AssertionError("evaluate() was reached: the config was not checked first")

    monkeypatch.setattr(vla.eval.evaluate, "evaluate", reached)
    out = tmp_path / "run"
    for argv in (["--cfg", *args], [*args, f"out={out}", "eval.workers=0", "progress=false"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("vla-rollout: error:") and "\n" not in err, err
        assert all(a in err for a in allowed), err
    assert not out.exists()


def test_an_unknown_group_option_or_key_names_the_choices(capsys):
    """Hydra's own message for ``env=foo`` lists the options below its first two lines (and the
    ``*_schema`` nodes among them); for a key the node does not have it suggests ``+key=``."""
    from vla.cli.rollout import main

    with pytest.raises(ValueError, match="unknown env 'foo' .*choose from house, libero, omnigibson$"):
        compose("rollout", ["env=foo"])
    with pytest.raises(ValueError, match="agent=scripted has no 'perception'; its keys: name$"):
        compose("rollout", ["agent.perception=gt"])
    with pytest.raises(ValueError, match="unknown key env.bogus: env=house has no 'bogus'; its keys: .*use_meshes"):
        compose("rollout", ["env=house", "env.bogus=1"])
    assert main(["--cfg", "eval=nope"]) == 2
    assert "choose from default" in capsys.readouterr().err
