"""Hydra configuration: compose the project's config groups from command-line overrides.

**One source of defaults.** Every option group is backed by a typed dataclass that holds its
defaults and validation (:data:`SCHEMAS`): ``env=house`` by ``envs.house.config.HouseConfig``,
``env=libero`` by ``envs.libero.config.LiberoConfig``, ``env=omnigibson`` by
``envs.omnigibson.config.OmniGibsonConfig``, ``agent=memory`` by
``vla.agents.map_agent.MemoryAgentOptions``, ``eval`` by ``vla.eval.evaluate.EvalSpec``, ``gst`` by
``vla.gst.options.GSTOptions``, ``perception=gt|realistic|harsh|learned`` by ``envs.perception.PerceptionConfig``,
``agent=remote`` by ``vla.agents.remote.RemoteAgentOptions``, ``vla-serve``'s own options by
``vla.serve.config.ServeOptions``, ... The dataclass defaults are registered in Hydra's ConfigStore as
``<name>_schema`` nodes; a group's YAML file lists its schema first in its defaults list and only
overrides (usually nothing but ``name``); a primary config lists its top-level schemas the same way
(``serve.yaml``: ``serve_schema``). So ``env.split=val`` works without ``+``, an unknown key is
refused by Hydra, and ``vla-rollout --cfg`` / ``vla-serve --cfg`` print the whole composed config.

The compose API is used (not ``@hydra.main``) so that a CLI does not change directory or write
Hydra's own output folders, and so that errors are reported as one clear line.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
from pathlib import Path
from typing import Any

from envs.registry import CONFIGS as ENV_CONFIGS

CONFIG_DIR = Path(os.environ.get("VLA_CONFIG_DIR", Path(__file__).resolve().parents[1] / "configs"))

# (group, schema) -> ("module:Class", fields left out); registered as <schema>_schema in the group
# ("" = the primary config's own group). A YAML option lists its schema first in its defaults.
# The env families' schemas come from their registry (envs.registry.CONFIGS).
SCHEMAS: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    **{("env", name): (target, ()) for name, target in ENV_CONFIGS.items()},
    ("agent", "memory"): ("vla.agents.map_agent:MemoryAgentOptions", ()),
    ("agent", "vla"): ("vla.agents.vla:VLAAgentOptions", ()),
    ("agent", "dagger"): ("vla.agents.dagger:DAggerOptions", ()),
    ("agent", "remote"): ("vla.agents.remote:RemoteAgentOptions", ()),
    ("agent", "openpi"): ("vla.agents.openpi:OpenpiAgentOptions", ()),
    ("eval", "default"): (
        "vla.eval.evaluate:EvalSpec",
        ("env", "agent", "out", "record", "record_keep", "merge_record", "extra", "perception", "rerun", "ray"),
    ),
    ("perception", "profile"): ("envs.perception:PerceptionConfig", ()),
    ("", "gst"): ("vla.gst.options:GSTOptions", ()),
    ("", "rerun"): ("vla.rollout.rerun_view:RerunOptions", ()),
    ("model", "model"): ("vla.policy.backbone:ModelConfig", ()),
    ("policy", "policy"): ("vla.policy.config:PolicyConfig", ()),
    ("data", "data"): ("vla.train.config:DataConfig", ()),
    ("train", "train"): ("vla.train.config:TrainConfig", ()),
    ("", "ray"): ("vla.eval.backends.options:RayOptions", ()),
    ("", "serve"): ("vla.serve.config:ServeOptions", ()),
}


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    return v


def schema_defaults(target: str, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """The defaults of a config dataclass (``"module:Class"``) as plain data (tuples become lists)."""
    module, attr = target.split(":")
    cls = getattr(importlib.import_module(module), attr)
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = _plain(f.default)
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = _plain(f.default_factory())  # type: ignore[misc]
        else:
            raise TypeError(f"config field {target}.{f.name} has no default")
    return out


# the groups each primary config composes, "/<name>" for a schema at its top level (schemas are imported
# only for those: vla-rollout never imports torch, nor the server)
CONFIG_GROUPS: dict[str, tuple[str, ...]] = {
    "rollout": ("env", "agent", "eval", "perception", "/gst", "/rerun", "/ray"),
    "gst": ("env", "agent", "perception", "/gst", "/rerun", "/ray"),
    "serve": ("env", "agent", "/serve"),
    "train": ("model", "policy", "data", "train"),
    "data_gen": (),
    "spatial": ("/ray",),
    "merge": (),
}
_REGISTERED: set[tuple[str, str]] = set()


def register_schemas(config_name: str | None = None) -> None:
    """Put the schemas' defaults into Hydra's ConfigStore (those of ``config_name``'s groups; all if None)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    wanted = CONFIG_GROUPS.get(config_name) if config_name else None
    for (group, name), (target, exclude) in SCHEMAS.items():
        if (wanted is not None and (group or f"/{name}") not in wanted) or (group, name) in _REGISTERED:
            continue
        cs.store(group=group or None, name=f"{name}_schema", node=schema_defaults(target, exclude))
        _REGISTERED.add((group, name))


def compose(config_name: str, overrides: list[str]) -> dict[str, Any]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not CONFIG_DIR.is_dir():
        raise ValueError(f"config directory {CONFIG_DIR} not found (set VLA_CONFIG_DIR)")
    register_schemas(config_name if config_name in CONFIG_GROUPS else None)
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=overrides)
        return OmegaConf.to_container(cfg, resolve=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ValueError("bad configuration: " + _explain(exc, config_name, overrides)) from exc


def _explain(exc: Exception, config_name: str, overrides: list[str]) -> str:
    """One line for a composition error that names what is allowed: an unknown option of a group
    (``perception=foo``: the group's options, its ``*_schema`` nodes left out), an unknown key
    (``agent.perception=1`` under an agent without it: the keys its node has); Hydra's first lines else."""
    text = str(exc)
    m = re.search(r"Could not find '([\w/]+)/([^'/]+)'", text)
    if m and (CONFIG_DIR / m.group(1)).is_dir():
        group, name = m.groups()
        return f"unknown {group} {name!r} ({group}=NAME); choose from {', '.join(groups(group))}"
    m = re.match(r"Could not override '([\w.]+)'", text)
    if m:
        parent, _, key = m.group(1).rpartition(".")
        rest = [o for o in overrides if not re.match(rf"{re.escape(m.group(1))}=", o.lstrip("+~"))]
        try:
            node = compose(config_name, rest)
            for part in parent.split(".") if parent else ():
                node = node[part]
        except (ValueError, KeyError, TypeError):
            node = None
        if isinstance(node, dict):
            what = f"{parent}={node['name']}" if parent and isinstance(node.get("name"), str) else parent or config_name
            return f"unknown key {m.group(1)}: {what} has no {key!r}; its keys: {', '.join(sorted(node))}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()][:2]
    return " ".join(lines) or type(exc).__name__


def check_config(cfg: dict) -> None:
    """The choice-like options of a composed config, checked now (``--cfg`` included) with errors that name
    what is allowed, not later in a worker: the env's options as its family validates them (LIBERO's
    ``env.perturb``: the factors and levels 0-3), the perception profile (``perception=`` /
    ``perception.name=``; a learned detector's checkpoint is given, not yet read) and a profile named in
    the agent's options (``agent.perception=``: the memory agent's, the VLA agent's), then the agent's
    options as its own options dataclass checks them (:data:`SCHEMAS`: ``agent.answer_from``, ...)."""
    from envs.registry import resolved_config
    from spatial_memory.profiles import PROFILES, profile
    from vla_common.strict import from_dict

    resolved_config(cfg["env"])
    profile(cfg.get("perception"))
    agent = cfg.get("agent") or {}
    name = agent.get("perception")
    if name is not None and name not in PROFILES:
        raise ValueError(f"agent.perception: unknown perception profile {name!r}; choose from {sorted(PROFILES)}")
    if ("agent", agent.get("name")) in SCHEMAS:
        module, attr = SCHEMAS[("agent", agent["name"])][0].split(":")
        from_dict(getattr(importlib.import_module(module), attr), agent, f"{agent['name']} agent", ignore=("name",))


def groups(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))
