"""``agent=vla``: the learned policy in closed loop (``agent.checkpoint=DIR``, any directory ``load_policy`` reads).

Every step the observation goes through the policy's own input transforms (the very chain it was
trained with, saved in the checkpoint), with the memory inputs when the policy reads them (the policy
builds them itself: :func:`vla.policy.memory_inputs`); decoding is constrained to the 256 action ids,
so every action decodes to a bin centre, is un-normalised with the checkpoint's statistics and clipped
to the env's bounds: always finite, always valid. With chunks (``policy.chunk = K``) the agent plays
each chunk through the chunk broker (:mod:`.chunks`): to its end, or its first ``replan`` actions;
``ensemble > 0`` re-plans every step and blends the overlapping predictions of the last K chunks with
ACT's exponential weights ``w_i = exp(-ensemble * i)`` (``i = 0`` the oldest prediction).
:func:`make_vla_agent` (the registry's ``agent=vla``) loads the checkpoint once and returns a
:class:`VLAMemoryAgent` (live map for servers and videos) when the policy reads the memory.

``answer(question)`` asks the same model (``answers=model``; with its memory inputs when it was
trained with them) or the spatial memory (``answers=memory``). Offline, a memory-reading policy
fuses each question's stream once (:class:`~vla.policy.question_map.StreamMemoryCache`; on disk
under ``memory_cache`` when given, shared with training's cache and across evaluations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec
from vla_common.strict import from_dict

from .chunks import ChunkBroker


@dataclass(frozen=True)
class VLAAgentOptions:
    checkpoint: str | None = None  # exported policy or vla-train checkpoint directory
    device: str = "auto"  # auto: cuda when available
    decode: str = "loop"  # loop (hand-rolled KV-cache decoding) | generate (transformers' generate, masked)
    replan: int = 0  # re-plan after this many actions of a chunk (0: when the queue runs out)
    ensemble: float = 0.0  # temporal ensembling weight (0: off)
    answers: str = "model"  # model | memory
    max_answer_tokens: int = 24
    max_video_frames: int = 8  # video frames shown with a question when the policy reads no memory (as in training)
    memory_cache: str | None = None  # offline GST answers: a directory keeping each question stream's fused memory
    # the sensors the policy's memory is built for: the run's perception profile (configs/agent/vla.yaml);
    # None: the profile the checkpoint was trained with (MemoryInputsConfig.perception)
    perception: str | None = None

    @classmethod
    def parse(cls, options: dict[str, Any]) -> "VLAAgentOptions":
        return from_dict(cls, options, "vla agent")

    def __post_init__(self) -> None:
        if not self.checkpoint:
            raise ValueError("agent=vla needs agent.checkpoint=DIR (an exported policy or a vla-train checkpoint)")
        if self.decode not in ("loop", "generate"):
            raise ValueError(f"agent.decode must be loop or generate, got {self.decode!r}")
        if self.answers not in ("model", "memory"):
            raise ValueError(f"agent.answers must be model or memory, got {self.answers!r}")
        if int(self.replan) < 0 or float(self.ensemble) < 0:
            raise ValueError("agent.replan and agent.ensemble must be >= 0")


def make_vla_agent(seed: int = 0, **options: Any) -> "VLAAgent":
    """``agent=vla``: the checkpoint loaded once; a policy that reads the memory (or answers from it) is
    a :class:`VLAMemoryAgent` (it has a live map for servers and videos), any other a :class:`VLAAgent`."""
    opts = VLAAgentOptions.parse(options)
    policy = _load(opts)
    reads = policy.config.inputs.uses_memory or opts.answers == "memory"
    return (VLAMemoryAgent if reads else VLAAgent)(seed, _policy=policy, **options)


def _load(opts: VLAAgentOptions):
    import torch

    from vla.policy import load_policy

    device = opts.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    policy = load_policy(opts.checkpoint, device)  # errors surface here, never mid-episode
    policy.eval()
    return policy


class VLAAgent:
    name = "vla"
    privileged = False

    def __init__(self, seed: int = 0, _policy: Any = None, **options: Any) -> None:
        self.options = VLAAgentOptions.parse(options)
        self.policy = _policy if _policy is not None else _load(self.options)
        from vla.policy import memory_inputs

        # the very memory inputs the policy was trained with (or the defaults, to answer from a memory),
        # built for the run's sensors: the memory's settings follow what it fuses, as the memory agent's do
        self.inputs = memory_inputs(
            self.policy, seed=seed, always=self.options.answers == "memory", perception=self.options.perception
        )
        if self.inputs is not None:
            from .map_feed import MemoryAnswers

            self.memory_answers = MemoryAnswers(self.inputs)
        self.frames = None  # the memory of frames the policy was trained with (inputs.history), if any
        icfg = self.policy.config.inputs
        if getattr(icfg, "history", 0):
            from vla.transforms.frame_memory import FrameMemory

            self.frames = FrameMemory(icfg.history, icfg.frames_camera)
        self.spec: EnvSpec | None = None
        self._chunks = ChunkBroker(self.options.replan, self.options.ensemble)
        self._streams = None  # offline GST answers: the fused streams of the last few questions

    # ------------------------------------------------------------------ protocol
    def seed(self, seed: int | tuple[int, ...]) -> None:
        if self.inputs is not None:
            self.inputs.seed(seed)

    def reset(self, instruction: str, spec: EnvSpec) -> None:
        cfg = self.policy.config
        if spec.action.dim != cfg.action_dim:
            raise ValueError(
                f"the policy emits {cfg.action_dim}-dim actions but the {spec.family} env takes {spec.action.dim} "
                f"({', '.join(spec.action.names)})"
            )
        missing = [
            c
            for c in dict.fromkeys([*cfg.inputs.cameras, cfg.inputs.frames_camera])
            if c and c not in spec.camera_names
        ]
        if missing:
            raise ValueError(
                f"the policy reads camera(s) {missing} but the {spec.family} env has {list(spec.camera_names)}"
                " (is rendering off?)"
            )
        self.spec = spec
        self._low, self._high = np.asarray(spec.action.low), np.asarray(spec.action.high)
        self._chunks.reset()
        if self.inputs is not None:
            self.inputs.reset(spec)
        if self.frames is not None:
            self.frames.reset()

    def _predict(self, observation: Observation) -> np.ndarray:
        return self.policy.infer_batch([observation.to_dict()], use_generate=self.options.decode == "generate")[0]

    def reads_next(self) -> bool | frozenset[str]:
        """Which frames the next ``act`` reads: every camera when it asks the policy (no action of a chunk
        left to play, or ensembling, which asks every step); else the camera the memory fuses at every
        step (the spatial memory's, the memory of frames'), or none."""
        if self._chunks.asks_next():
            return True
        fused = set()
        if self.inputs is not None:
            first = self.spec.camera_names[0] if self.spec is not None and self.spec.camera_names else None
            fused.add(self.inputs.config.camera or first)  # the memory's own, or the observation's first
        if self.frames is not None:
            fused.add(self.frames.camera)
        if None in fused:
            return True
        return frozenset(fused) if fused else False

    def act(self, observation: Observation) -> np.ndarray:
        if self.spec is None:
            raise RuntimeError("VLAAgent.act before reset(instruction, spec)")
        if self.inputs is not None:
            observation = self.inputs(observation)
        if self.frames is not None:
            observation = self.frames(observation)
        action = self._chunks(lambda: self._predict(observation))
        action = np.nan_to_num(np.asarray(action, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        return np.clip(action, self._low, self._high)

    def answer(self, question: Any) -> str:
        if self.options.answers == "memory":
            return self.memory_answers(question)
        from vla.policy.question_inputs import question_inputs
        from vla.policy.question_map import StreamMemoryCache, question_entries

        memory = self.policy.config.inputs.uses_memory
        entries = None
        if memory:
            live = self.inputs.memory if self.inputs is not None else None
            mid_episode = question.current_pose is not None and live is not None and live.n_frames > 0
            # mid-episode the live memory has fused exactly the question's video; offline, fuse its stream
            # (once per stream: a scene's questions share it)
            if mid_episode:
                entries = question_entries(question, self.inputs)
            else:
                if self._streams is None:
                    self._streams = StreamMemoryCache(self.inputs.config, self.options.memory_cache)
                entries = self._streams.question_entries(question)
        images, prompt = question_inputs(question, memory, self.options.max_video_frames, entries)
        mi = self.policy.transform.question(images, prompt)
        return self.policy.answer_batch([mi], max_new_tokens=self.options.max_answer_tokens)[0]


class VLAMemoryAgent(VLAAgent):
    """A VLA agent whose policy reads the spatial memory: it also exposes the memory (servers, videos)."""

    def live_memory(self):
        return self.inputs.memory

    def live_map(self) -> np.ndarray | None:
        return self.inputs.live_map()
