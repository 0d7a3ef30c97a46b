"""How LIBERO's demonstration files look without a stored EnvSpec (:class:`envs.demo_layout.DemoLayout`).

Two kinds: LIBERO's official files (its ``scripts/create_dataset.py``: attributes ``problem_info``,
``env_args``, ``bddl_file_name``, ``macros_image_convention``; images as the simulator's raw OpenGL
buffers; the state as ``obs/ee_states`` + ``obs/gripper_states``; depth, if any, the normalised
z-buffer) and this project's older recordings (``image_orientation``, metric cameras, ``obs/state``).
Camera datasets are named by :data:`~envs.libero.env.RECORD_NAMES` (``eye_in_hand`` is the wrist).
"""

from __future__ import annotations

from typing import Any

from ..demo_layout import DemoLayout
from ..spec import ActionSpec, ArraySpec, CameraSpec, EnvSpec
from ..orientation import ORIENTATIONS
from .env import ACTION_NAMES, RECORD_NAMES, STATE_NAMES

_OFFICIAL_ATTRS = ("problem_info", "env_args", "bddl_file_name")


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def benchmark_language(task_name: str) -> str:
    """LIBERO's instruction for a task name, by the benchmark's rule (what ``LiberoEnv.instruction``
    says at evaluation): underscores become spaces; LIBERO-90/10 names (``KITCHEN_SCENE3_...``) lose
    their scene prefix."""
    if task_name[:1].isupper() and "SCENE" in task_name:
        rest = task_name[task_name.find("SCENE") + len("SCENE") :]
        task_name = rest[len(rest) - len(rest.lstrip("0123456789")) :].lstrip("_")
    return " ".join(task_name.split("_"))


class LiberoDemoLayout(DemoLayout):
    derived_state = ("ee_states", "gripper_states")
    missing_metric_hint = (
        "official LIBERO files store no metric depth, masks or camera matrices; record with record=DIR"
    )

    def recognizes(self, attrs: Any, prefixes: list[str], action_dim: int) -> bool:
        return any(k in attrs for k in _OFFICIAL_ATTRS)

    def implied_spec(
        self, family: str, cameras: list[CameraSpec], sensors: dict[str, ArraySpec], action_dim: int, state_dim: int
    ) -> EnvSpec:
        return EnvSpec(
            family="libero",
            action=ActionSpec((-1.0,) * 7, (1.0,) * 7, ACTION_NAMES),
            state=ArraySpec((8,), "float32", STATE_NAMES),
            cameras=tuple(cameras),
            sensors=sensors,
            info={"gripper": "-1 open, +1 close"},
        )

    def camera_names(self, prefixes: list[str]) -> dict[str, str]:
        """agentview, then the wrist; unknown prefixes after them, sorted."""
        inverse = {p: c for c, p in RECORD_NAMES.items()}
        order = {p: i for i, p in enumerate(RECORD_NAMES.values())}
        ranked = sorted(prefixes, key=lambda p: (order.get(p, len(order)), p))
        return {inverse.get(p, p): p for p in ranked}

    def stored_orientation(self, attrs: Any) -> str | None:
        if "image_orientation" in attrs:
            o = _text(attrs["image_orientation"])
            if o not in ORIENTATIONS:  # opengl: the raw buffer (official files)
                raise ValueError(f"image_orientation {o!r} is not one of {ORIENTATIONS}")
            return o
        convention = _text(attrs.get("macros_image_convention", "opengl"))
        if convention not in ("opengl", "opencv"):
            raise ValueError(f"macros_image_convention {convention!r} is not 'opengl' or 'opencv'")
        return "opengl" if convention == "opengl" else "upright"

    def official(self, attrs: Any) -> bool:
        return "image_orientation" not in attrs

    def instruction_from_name(self, stem: str) -> str | None:
        """``<task>_demo.hdf5`` (the official files' names): the benchmark's instruction for ``<task>``
        (the BDDL wording in ``problem_info`` differs from what the env says, e.g. "pick the alphabet
        soup ..." vs "pick up the alphabet soup ...")."""
        return benchmark_language(stem[: -len("_demo")]) if stem.endswith("_demo") else None


LAYOUT = LiberoDemoLayout()
