"""``agent=vla``: the learned policy in closed loop (``agent.checkpoint=DIR``, any directory ``load_policy`` reads).

Every step the observation goes through the policy's own input transforms (the very chain it was
trained with, saved in the checkpoint), with the memory inputs when the policy reads them (its
``MemoryInputs`` config is saved too); decoding is constrained to the 256 action ids, so every action
decodes to a bin centre, is un-normalised with the checkpoint's statistics and clipped to the env's
bounds: always finite, always valid. With chunks (``policy.chunk = K``) the agent queues K actions
and re-plans when the queue runs out (or after ``replan`` actions); ``ensemble > 0`` re-plans every
step and blends the overlapping predictions of the last K chunks with ACT's exponential weights
``w_i = exp(-ensemble * i)`` (``i = 0`` the oldest prediction).

``answer(question)`` asks the same model (``answers=model``; with its memory inputs when it was
trained with them) or the spatial memory (``answers=memory``). Offline, a memory-reading policy
fuses each question's stream once (:class:`~vla.data.stream_memory.StreamMemoryCache`; on disk
under ``memory_cache`` when given, shared with training's cache and across evaluations).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec
from spatial_memory.strict import from_dict


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

    def __post_init__(self) -> None:
        if not self.checkpoint:
            raise ValueError("agent=vla needs agent.checkpoint=DIR (an exported policy or a vla-train checkpoint)")
        if self.decode not in ("loop", "generate"):
            raise ValueError(f"agent.decode must be loop or generate, got {self.decode!r}")
        if self.answers not in ("model", "memory"):
            raise ValueError(f"agent.answers must be model or memory, got {self.answers!r}")
        if int(self.replan) < 0 or float(self.ensemble) < 0:
            raise ValueError("agent.replan and agent.ensemble must be >= 0")


def _reads_memory(checkpoint: str | None) -> bool:
    import json
    from pathlib import Path

    try:
        meta = json.loads((Path(checkpoint) / "vla_policy.json").read_text())
        inputs = meta["policy"]["inputs"]
        return bool(inputs.get("memory_map") or inputs.get("memory_text"))
    except (OSError, ValueError, KeyError, TypeError):
        return False  # load_policy will say what is wrong with the directory


class VLAAgent:
    name = "vla"
    privileged = False

    def __new__(cls, seed: int = 0, **options: Any):
        # a policy that reads the memory (or answers from it) is a VLAMemoryAgent: it has a live map
        if cls is VLAAgent and (options.get("answers") == "memory" or _reads_memory(options.get("checkpoint"))):
            cls = VLAMemoryAgent
        return super().__new__(cls)

    def __init__(self, seed: int = 0, **options: Any) -> None:
        self.options = from_dict(VLAAgentOptions, options, "vla agent")
        import torch

        from vla.policy import load_policy

        device = self.options.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.policy = load_policy(self.options.checkpoint, device)  # errors surface here, never mid-episode
        self.policy.eval()
        self.inputs = None
        if self.policy.config.inputs.uses_memory or self.options.answers == "memory":
            from vla.transforms.memory import MemoryInputs

            from .with_memory import MemoryAnswers

            self.inputs = MemoryInputs(self.policy.config.memory or {}, seed=seed)
            self.memory_answers = MemoryAnswers(self.inputs)
        self.spec: EnvSpec | None = None
        self._queue: deque = deque()
        self._history: deque = deque()  # ensemble: (step predicted, chunk)
        self._t = 0
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
        missing = [c for c in cfg.inputs.cameras if c not in spec.camera_names]
        if missing:
            raise ValueError(
                f"the policy reads camera(s) {missing} but the {spec.family} env has {list(spec.camera_names)}"
                " (is rendering off?)"
            )
        self.spec = spec
        self._low, self._high = np.asarray(spec.action.low), np.asarray(spec.action.high)
        self._queue.clear()
        self._history.clear()
        self._t = 0
        if self.inputs is not None:
            self.inputs.reset(spec)

    def _predict(self, observation: Observation) -> np.ndarray:
        return self.policy.infer_batch([observation.to_dict()], use_generate=self.options.decode == "generate")[0]

    def act(self, observation: Observation) -> np.ndarray:
        if self.spec is None:
            raise RuntimeError("VLAAgent.act before reset(instruction, spec)")
        if self.inputs is not None:
            observation = self.inputs(observation)
        K = self.policy.config.chunk
        if self.options.ensemble > 0:
            self._history.append((self._t, self._predict(observation)))
            while self._history and self._t - self._history[0][0] >= K:
                self._history.popleft()
            preds = np.stack([chunk[self._t - t0] for t0, chunk in self._history])  # oldest first
            w = np.exp(-self.options.ensemble * np.arange(len(preds)))
            action = (w[:, None] * preds).sum(0) / w.sum()
        else:
            limit = self.options.replan or K
            if not self._queue or (K - len(self._queue)) >= limit:
                self._queue = deque(self._predict(observation)[: max(1, limit)])
            action = self._queue.popleft()
        self._t += 1
        action = np.nan_to_num(np.asarray(action, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        return np.clip(action, self._low, self._high)

    def answer(self, question: Any) -> str:
        if self.options.answers == "memory":
            return self.memory_answers(question)
        from vla.data.gst_qa import question_inputs
        from vla.data.stream_memory import StreamMemoryCache, question_entries

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
                    self._streams = StreamMemoryCache(self.policy.config.memory or {}, self.options.memory_cache)
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
