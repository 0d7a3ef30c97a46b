"""Hydra configuration: compose the project's config groups from command-line overrides.

The compose API is used (not ``@hydra.main``) so that a CLI does not change directory or write
Hydra's own output folders, and so that errors are reported as one clear line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(os.environ.get("VLA_CONFIG_DIR", Path(__file__).resolve().parents[1] / "configs"))


def compose(config_name: str, overrides: list[str]) -> dict[str, Any]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not CONFIG_DIR.is_dir():
        raise ValueError(f"config directory {CONFIG_DIR} not found (set VLA_CONFIG_DIR)")
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=overrides)
        return OmegaConf.to_container(cfg, resolve=True)
    except (HydraException, OmegaConfBaseException) as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()][:2]
        raise ValueError("bad configuration: " + (" ".join(lines) or type(exc).__name__)) from exc


def groups(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))
