"""Configuration of the ``libero`` env family: every option and its default (the official protocol).

The Hydra group ``configs/env/libero.yaml`` only overrides these; ``vla-rollout --cfg`` prints them
all. A key that is not a field here is rejected with the list of valid ones.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vla_common.strict import from_dict

ENV_SEED = 0  # LIBERO's env.seed(), once per task env, as OpenVLA's get_libero_env
SETTLE_STEPS = 10  # the protocol's no-op steps after reset (docs/LIBERO.md)
INIT_STATES = ("official", "sampled")
RENDER_QUALITIES = ("default", "fast")  # env.render_quality (envs/libero/render_quality.py)
INSTRUCTIONS = ("own", "distractor")  # env.instruction (envs/libero/language.py)
SAMPLED_SEED = 100_000  # sampled init state of trial k: the placement sampler seeded with SAMPLED_SEED + k
SAMPLED_TRIALS = 10_000  # trials a task offers with sampled init states


def check_arm_init_noise(noise: float, init_states: str) -> None:
    """``env.arm_init_noise`` is a joint noise in [0, 0.2] rad, for sampled init states only."""
    if not 0.0 <= float(noise) <= 0.2:
        raise ValueError(f"env.arm_init_noise must be in [0, 0.2] rad, got {noise!r}")
    if noise and init_states != "sampled":
        raise ValueError("env.arm_init_noise applies to env.init_states=sampled only (an official state fixes the arm)")


@dataclass(frozen=True)
class LiberoConfig:
    suite: str = "libero_spatial"  # libero_spatial | libero_object | libero_goal | libero_10 | libero_90 |
    #                                libero_mem (the project's memory suite; sampled init states only)
    resolution: int = 256  # camera height = width
    cameras: tuple[str, ...] = ("agentview", "wrist")
    render: bool = True  # false: no camera observations (fast scripted rollouts, no videos)
    depth: bool = True
    segmentation: bool = True  # instance masks
    orientation: str = "rot180"  # the protocol's 180-degree rotation; "upright" for the true camera view
    settle_steps: int = SETTLE_STEPS  # no-op steps after reset
    max_steps: int | None = None  # None: the suite's limit (220 / 280 / 300 / 520 / 400)
    controller: str = "OSC_POSE"
    hard_reset: bool = True  # reload the model on every reset, as the official evaluation does
    env_seed: int = ENV_SEED  # LIBERO's env.seed() once per task env; episode k sees the stream after k resets
    init_states: str = "official"  # official: the suite's fixed init states (trial k = state k) | sampled:
    #                                a fresh placement from the task's BDDL regions, seeded by the trial
    #                                (demonstrations from states the official evaluation never uses)
    arm_init_noise: float = 0.0  # sampled states only: robosuite's Gaussian noise (rad, per joint) on the
    #                              arm's start; the official states were recorded with robosuite's default
    #                              0.02 (their hand starts spread ~5-7 mm), LIBERO's env sets none
    render_quality: str = "default"  # fast: the cameras draw a copy of the scene with decimated meshes (~2.5x
    #                                  cheaper frames, other images; physics untouched); opt-in, never for a
    #                                  headline number (envs/libero/render_quality.py, docs/LIBERO.md)
    instruction: str = "own"  # own | distractor: each scene given the instruction of the task whose bowl
    #                           stands there as the other bowl, success = that bowl placed (the language
    #                           check; libero_spatial: envs/libero/language.py)
    perturb: str = ""  # robustness factors, e.g. camera:2 or camera:2+light:1 (envs/libero/perturb.py;
    #                    docs/LIBERO.md); "" = the nominal scene of the protocol

    def __post_init__(self) -> None:
        object.__setattr__(self, "cameras", tuple(self.cameras))
        if self.init_states not in INIT_STATES:
            raise ValueError(f"env.init_states must be one of {INIT_STATES}, got {self.init_states!r}")
        check_arm_init_noise(self.arm_init_noise, self.init_states)
        if self.render_quality not in RENDER_QUALITIES:
            raise ValueError(f"env.render_quality must be one of {RENDER_QUALITIES}, got {self.render_quality!r}")
        from .mem import check_init_states

        check_init_states(self.suite, self.init_states)
        if self.instruction not in INSTRUCTIONS:
            raise ValueError(f"env.instruction must be one of {INSTRUCTIONS}, got {self.instruction!r}")
        from .perturb import canonical

        object.__setattr__(self, "perturb", canonical(self.perturb))

    @classmethod
    def from_dict(cls, cfg: dict[str, Any] | None) -> "LiberoConfig":
        return from_dict(cls, cfg, "libero", ignore=("name",))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cameras"] = list(self.cameras)
        return d
