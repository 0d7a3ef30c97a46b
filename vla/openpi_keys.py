"""openpi's observation keys and ours: the key map both sides of openpi's protocol speak through.

openpi's clients name observation entries their own way (its LIBERO example sends
``observation/image``, ``observation/wrist_image``, ``observation/state``, ``prompt``); a per-env
**key map** (``configs/openpi/<env>.yaml``, or given explicitly) names the key of our observation dict
(``EnvSpec.features``: ``prompt``, ``state``, ``sensors/<name>``, ``cameras/<name>/<field>``) each one
becomes. The server (``vla/serve/openpi.py``) turns openpi observations into ours with it; the openpi
agent (``vla/agents/openpi.py``, a client of any openpi server) turns ours into openpi's.
"""

from __future__ import annotations

from typing import Any

CAMERA_FIELDS = ("rgb", "depth", "K", "T_world_cam", "instance", "label_ids", "label_names")


class KeyMap:
    """openpi observation key -> our observation key, for one env family (see the module doc);
    ``ValueError`` naming what is wrong for a map that does not name observation keys."""

    def __init__(self, keys: dict[str, str], family: str = "") -> None:
        if not isinstance(keys, dict) or not keys:
            raise ValueError(f"an openpi key map is a non-empty map of openpi key -> observation key, got {keys!r}")
        self.family = family
        self.keys = {str(k): str(v) for k, v in keys.items()}
        for ours in self.keys.values():
            parts = ours.split("/")
            ok = ours in ("prompt", "state") or (parts[0] == "sensors" and len(parts) == 2 and parts[1])
            ok = ok or (len(parts) == 3 and parts[0] == "cameras" and parts[1] and parts[2] in CAMERA_FIELDS)
            if not ok:
                raise ValueError(
                    f"openpi key map: {ours!r} is not an observation key (prompt, state, sensors/<name>, "
                    f"cameras/<name>/<{'|'.join(CAMERA_FIELDS)}>)"
                )
        if len(set(self.keys.values())) != len(self.keys):
            raise ValueError("openpi key map: two openpi keys map to the same observation key")
        self.openpi_of = {v: k for k, v in self.keys.items()}
        self.prompt_key = self.openpi_of.get("prompt")

    @classmethod
    def for_env(cls, family: str, override: dict[str, str] | None = None) -> "KeyMap":
        """The key map given, else the one declared for ``family`` in ``configs/openpi/``."""
        if override:
            return cls(dict(override), family)
        from vla.config import CONFIG_DIR

        path = CONFIG_DIR / "openpi" / f"{family}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in path.parent.glob("*.yaml"))
            raise ValueError(
                f"no openpi key map for the {family!r} env (declared: {known}); pass openpi_keys={{openpi_key: key}}"
            )
        from omegaconf import OmegaConf

        return cls(OmegaConf.to_container(OmegaConf.load(path)), family)

    def openpi_observation(self, ours: dict[str, Any]) -> dict[str, Any]:
        """An openpi observation of our observation dict (only the keys the map names)."""
        return {theirs: ours[o] for theirs, o in self.keys.items() if o in ours}
