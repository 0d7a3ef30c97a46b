"""Simulators behind one gymnasium protocol (docs/ARCHITECTURE.md §2-§3): ``envs.registry.make_env``."""

from . import _gl  # noqa: F401  (headless GL settings before any MuJoCo import)
