"""What an env family's demonstration files say about themselves when they do not store an EnvSpec.

A demonstration file (``data/demo_<i>/...``, read by ``vla/data/layout.py``) written by a recorder of
this project stores its env's :class:`~envs.spec.EnvSpec`; older recordings and other projects' files
(LIBERO's official HDF5) do not, and the reader asks the family for what differs between families: how
to recognise its files, the spec they imply, the order of their cameras, how their images are stored,
the instruction a file name implies, and how to derive the state when ``obs/state`` is missing.

A family declares the capability by a ``demo_layout()`` method (``envs.registry.HasDemoLayout``) that
returns a :class:`DemoLayout`; this base class is also what a family without one gets: nothing
recognised, every camera under its own name in sorted order, images as stored, a spec with unbounded
actions.
"""

from __future__ import annotations

import math
from typing import Any

from .spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec


class DemoLayout:
    """A family's demonstration-file conventions (the defaults: a family with none of its own)."""

    derived_state: tuple[str, ...] = ()  # obs/ datasets concatenated into the state when obs/state is missing
    missing_metric_hint: str = ""  # why a file without metric camera fields has none (appended to the error)

    def recognizes(self, attrs: Any, prefixes: list[str], action_dim: int) -> bool:
        """Whether a file without an ``env_spec`` attribute is this family's (its ``data`` attributes,
        the prefixes of its ``obs/<prefix>_rgb`` datasets, the dimension of its actions)."""
        return False

    def implied_spec(
        self, family: str, cameras: list[CameraSpec], sensors: dict[str, ArraySpec], action_dim: int, state_dim: int
    ) -> EnvSpec:
        """The EnvSpec a file without one implies."""
        return EnvSpec(
            family=family,
            action=ActionSpec(
                (-math.inf,) * action_dim, (math.inf,) * action_dim, tuple(f"a{i}" for i in range(action_dim))
            ),
            state=ArraySpec((state_dim,), "float64"),
            cameras=tuple(cameras),
            sensors=sensors,
        )

    def camera_names(self, prefixes: list[str]) -> dict[str, str]:
        """Camera name -> dataset prefix (``obs/<prefix>_rgb``), in the env's order."""
        return {p: p for p in sorted(prefixes)}

    def stored_orientation(self, attrs: Any) -> str | None:
        """How the file stores its images (a name of ``envs.orientation.ORIENTATIONS``), None when
        they are stored as the env delivers them; ``ValueError`` naming the attribute for a bad one."""
        return None

    def official(self, attrs: Any) -> bool:
        """Whether the file is another project's, whose per-pixel extras (depth, masks) are not in metres
        and not offered."""
        return False

    def instruction_from_name(self, stem: str) -> str | None:
        """The instruction a file's name implies (used when no ``language_instruction`` attribute says it)."""
        return None


DEFAULT = DemoLayout()
