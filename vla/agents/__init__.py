"""Agents by name: ``make_agent({"name": "random"})``."""

from __future__ import annotations

import importlib
from typing import Any

from .base import (
    Agent,
    AgentSessionLost,
    AgentUnavailable,
    DrawsLiveMap,
    HasLiveMemory,
    InfrastructureError,
    LabelsActions,
    PrivilegedAgent,
    Seedable,
    check_agent,
    is_privileged,
)

_AGENTS = {
    "random": "vla.agents.random:RandomAgent",
    "scripted": "vla.agents.scripted:ScriptedAgent",
    "memory": "vla.agents.map_agent:MemoryAgent",
    "remote": "vla.agents.remote:RemoteAgent",
    "openpi": "vla.agents.openpi:OpenpiAgent",
    "vla": "vla.agents.vla:make_vla_agent",
    "dagger": "vla.agents.dagger:DAggerAgent",
}


def agent_names() -> list[str]:
    return sorted(_AGENTS)


def make_agent(cfg: dict[str, Any], seed: int = 0) -> Agent:
    """Build an agent from its config: ``name`` is a registered agent or ``"package.module:Class"``
    (any class implementing the :class:`Agent` protocol, constructed as ``Class(seed=..., **rest)``);
    an object that does not implement the protocol is refused here, with what is missing."""
    cfg = dict(cfg)
    name = cfg.pop("name", None)
    target = _AGENTS.get(name) if isinstance(name, str) else None
    if target is None and isinstance(name, str) and ":" in name:
        target = name
    if target is None:
        raise ValueError(f"unknown agent {name!r}; available agents: {agent_names()} (or 'package.module:Class')")
    module, attr = target.split(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import agent {target!r}: {exc}") from exc
    try:
        agent = cls(seed=seed, **cfg)
    except TypeError as exc:
        raise ValueError(f"bad options for agent {name!r}: {exc}") from exc
    return check_agent(agent)


__all__ = [
    "Agent",
    "AgentSessionLost",
    "AgentUnavailable",
    "InfrastructureError",
    "PrivilegedAgent",
    "Seedable",
    "DrawsLiveMap",
    "HasLiveMemory",
    "LabelsActions",
    "check_agent",
    "is_privileged",
    "make_agent",
    "agent_names",
]
