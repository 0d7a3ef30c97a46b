"""One way to build an environment by name, used by every entry point.

A family registers itself with :func:`register`; its module is imported lazily the first time the
name is used, so ``import envs`` stays cheap and optional simulators (OmniGibson) cost nothing
until asked for. A family's config is a plain dict (the ``env`` Hydra group, ``name`` selects the
family); unknown keys are rejected by the family with the list of valid ones.

A family whose simulator may be missing (OmniGibson needs Isaac Sim) declares
:class:`RequiresSimulator`; :func:`require` lets an entry point fail at once, with the family's own
message and install steps, before it plans any work.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Protocol, runtime_checkable

from .base import TaskInfo, VLAEnv


class EnvFamily(Protocol):
    name: str

    def tasks(self, cfg: dict[str, Any]) -> list[TaskInfo]: ...

    def make(self, cfg: dict[str, Any], task_id: int) -> VLAEnv: ...


@runtime_checkable
class ResolvesConfig(Protocol):
    """A family that can spell out its config with every default filled in."""

    def resolve(self, cfg: dict[str, Any]) -> dict[str, Any]: ...


@runtime_checkable
class RequiresSimulator(Protocol):
    """A family whose simulator may not be installed: ``require(cfg)`` raises a ``ValueError`` saying how to
    install it (without importing the simulator itself)."""

    def require(self, cfg: dict[str, Any]) -> None: ...


@runtime_checkable
class HasProtocolTrials(Protocol):
    """A family whose evaluation protocol fixes the trials per task (LIBERO: 50, whatever the number
    of initial states); families without one are evaluated on every initial state of a task."""

    def protocol_trials(self, cfg: dict[str, Any]) -> int: ...


@runtime_checkable
class HasCategories(Protocol):
    """A family that knows its object categories: ``categories()`` is the
    :class:`~spatial_memory.perception.CategoryModel` a perception profile's detector draws confusions and
    false-positive labels from (families without one get an empty model)."""

    def categories(self) -> Any: ...


@runtime_checkable
class HasDemoLayout(Protocol):
    """A family whose demonstration files may come without a stored EnvSpec: ``demo_layout()`` is the
    :class:`~envs.demo_layout.DemoLayout` that says how they look (families without one get its defaults)."""

    def demo_layout(self) -> Any: ...


@runtime_checkable
class HasSpatialScenes(Protocol):
    """A family whose scenes ``vla-data spatial`` renders for spatial-perception questions:
    ``spatial_scenes(split, first, n, resolution, options)`` lists ``n`` scenes of ``split`` (``train`` /
    ``val`` / ``test``, disjoint) from the ``first``, each ``{"name", "env" (config), "task", "trial"}``;
    ``options`` are the generator's (each family reads its own: ``use_meshes``, ``suite``, ``libero_tasks``).
    Too few scenes in the split raise a ``ValueError`` saying how many there are."""

    def spatial_scenes(
        self, split: str, first: int, n: int, resolution: int, options: dict[str, Any]
    ) -> list[dict[str, Any]]: ...


# name -> "module:attribute" of an EnvFamily factory (imported on first use)
_LAZY: dict[str, str] = {
    "libero": "envs.libero.family:LiberoFamily",
    "house": "envs.house.family:HouseFamily",
    "omnigibson": "envs.omnigibson.family:OmniGibsonFamily",
}
# each family's config dataclass (its options, their defaults and checks): the schema of the Hydra group
# ``configs/env/<name>.yaml`` (vla.config reads it from here; a string, so nothing is imported to compose)
CONFIGS: dict[str, str] = {
    "libero": "envs.libero.config:LiberoConfig",
    "house": "envs.house.config:HouseConfig",
    "omnigibson": "envs.omnigibson.config:OmniGibsonConfig",
}
_FAMILIES: dict[str, EnvFamily] = {}


def register(name: str, factory: Callable[[], EnvFamily] | str) -> None:
    """Register a family object factory (or a ``"module:attr"`` string, imported lazily)."""
    if isinstance(factory, str):
        _LAZY[name] = factory
        _FAMILIES.pop(name, None)
    else:
        _FAMILIES[name] = factory()


def lazy_registrations() -> dict[str, str]:
    """Every family registered by ``"module:attr"`` (built in or added at run time): what a fresh
    process (a fork-server worker) re-registers to know the same families."""
    return dict(_LAZY)


def names() -> list[str]:
    return sorted(set(_LAZY) | set(_FAMILIES))


def family(name: str) -> EnvFamily:
    if name not in _FAMILIES:
        if name not in _LAZY:
            raise ValueError(f"unknown env {name!r}; registered envs: {names()}")
        module, attr = _LAZY[name].split(":")
        _FAMILIES[name] = getattr(importlib.import_module(module), attr)()
    return _FAMILIES[name]


def _split(cfg: dict[str, Any]) -> tuple[EnvFamily, dict[str, Any]]:
    if "name" not in cfg:
        raise ValueError(f"env config needs a 'name' (one of {names()}), got keys {sorted(cfg)}")
    rest = {k: v for k, v in cfg.items() if k != "name"}
    return family(cfg["name"]), rest


def require(cfg: dict[str, Any]) -> None:
    """Fail now (``ValueError`` with the install steps) if the family's simulator is missing; no-op otherwise."""
    fam, rest = _split(cfg)
    if isinstance(fam, RequiresSimulator):
        fam.require(rest)


def list_tasks(cfg: dict[str, Any]) -> list[TaskInfo]:
    fam, rest = _split(cfg)
    return fam.tasks(rest)


def protocol_trials(cfg: dict[str, Any]) -> int | None:
    """The trials per task of the family's evaluation protocol (None: every initial state)."""
    fam, rest = _split(cfg)
    return int(fam.protocol_trials(rest)) if isinstance(fam, HasProtocolTrials) else None


def make_env(cfg: dict[str, Any], task_id: int = 0) -> VLAEnv:
    """Build the env for one task of the family named in ``cfg['name']``."""
    fam, rest = _split(cfg)
    return fam.make(rest, task_id)


def demo_layout(name: str):
    """The demonstration-file conventions of family ``name``; the defaults for a family without its own
    or a name no family is registered under (a file's ``"unknown"`` family)."""
    from .demo_layout import DEFAULT

    if name not in _LAZY and name not in _FAMILIES:
        return DEFAULT
    fam = family(name)
    return fam.demo_layout() if isinstance(fam, HasDemoLayout) else DEFAULT


def recognize_demo(attrs: Any, prefixes: list[str], action_dim: int) -> str | None:
    """The first family (in registration order) whose layout recognises a demonstration file without an
    EnvSpec; None when none does."""
    for name in dict.fromkeys([*_LAZY, *_FAMILIES]):
        if demo_layout(name).recognizes(attrs, prefixes, action_dim):
            return name
    return None


def resolved_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` with the family's defaults filled in (as given when the family cannot say)."""
    fam, rest = _split(cfg)
    if isinstance(fam, ResolvesConfig):
        return {"name": cfg["name"], **fam.resolve(rest)}
    return dict(cfg)
