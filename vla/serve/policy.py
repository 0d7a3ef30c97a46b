"""What the server hosts: a :class:`BatchPolicy` -- batch inference with per-session state.

Many simulators talk to one server; each controlling client is a *session* with its own episode,
its own agent state and its own spatial memory. The batcher (:mod:`.batcher`) collects the
``infer`` calls of several sessions and hands them to :meth:`BatchPolicy.infer_batch` in one call.

Two adapters build a ``BatchPolicy`` from what the project has (:func:`make_batch_policy`):

* :class:`AgentSessions` -- any non-privileged agent of the registry (``memory``, ``random``,
  ``pkg.mod:Class``): one agent instance per session; a batch is a loop over the sessions' agents.
* :class:`ModelSessions` -- a :class:`BatchModel` (a learned policy that batches its own forward
  pass: ``infer_batch(list of observation dicts) -> list of actions`` and ``metadata()``), with
  optional per-session spatial-memory inputs (:class:`~vla.transforms.map_inputs.MemoryInputs`) added
  to each observation before the batched call. The learned VLA drops in here.

A privileged agent (the scripted expert) plans on the simulator's scene truth through
``bind(env)``; a server never has the env, so such agents are refused with that reason.

Thread model: every method of a ``BatchPolicy`` is called from the server's one inference thread,
in order; :meth:`BatchPolicy.live_memory` is also called from query threads, which only read the
returned memory through its ``snapshot()``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from envs.observation import Observation
from envs.spec import EnvSpec

from ..agents import HasLiveMemory, Seedable, is_privileged, make_agent


@runtime_checkable
class BatchPolicy(Protocol):
    def metadata(self) -> dict[str, Any]: ...

    def reset(self, session: str, instruction: str, spec: EnvSpec, seed: Any = None) -> None: ...

    def infer_batch(self, sessions: list[str], observations: list[dict[str, Any]]) -> list[Any]: ...

    def close(self, session: str) -> None: ...

    def live_memory(self, session: str) -> Any: ...


@runtime_checkable
class BatchModel(Protocol):
    """A stateless batched policy (the learned VLA): the prompt travels in each observation."""

    def metadata(self) -> dict[str, Any]: ...

    def infer_batch(self, observations: list[dict[str, Any]]) -> list[np.ndarray]: ...


class SessionError(LookupError):
    """A session id the policy does not know (never reset, or closed)."""


class ObservationError(ValueError):
    """An observation that does not match the session's EnvSpec (the client's fault)."""


class PolicyOutputError(RuntimeError):
    """The policy returned something that is not an action (wrong shape, NaN)."""


def check_observation(spec: EnvSpec, d: dict[str, Any]) -> Observation:
    """The observation dict validated against the session's spec: keys, shapes, dtypes (via
    :meth:`EnvSpec.check_observation`), then finiteness (NaN or inf anywhere but depth, where they
    mark invalid pixels, is an error naming the key); ``ObservationError`` says what was wrong."""
    if not isinstance(d, dict):
        raise ObservationError(f"an observation must be a map of flat keys, got {type(d).__name__}")
    try:
        spec.check_observation(d)
        for k, v in d.items():
            if isinstance(v, np.ndarray) and v.dtype.kind == "f" and not k.endswith("/depth"):
                if not np.isfinite(v).all():
                    raise ValueError(f"observation key {k!r} contains NaN or inf")
            if isinstance(v, float) and not np.isfinite(v):
                raise ValueError(f"observation key {k!r} is NaN or inf")
        return Observation.from_dict(d)
    except ObservationError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise ObservationError(str(exc).strip("'\"")) from None


def check_action(spec: EnvSpec, action: Any) -> np.ndarray:
    """A policy's output as float64 of shape (dim,) or a chunk (T, dim), finite; else ``PolicyOutputError``."""
    try:
        a = np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PolicyOutputError(f"the policy returned a non-numeric action: {exc}") from exc
    dim = spec.action.dim
    if not (a.shape == (dim,) or (a.ndim == 2 and a.shape[1] == dim and a.shape[0] >= 1)):
        raise PolicyOutputError(f"the policy returned an action of shape {a.shape}; expected ({dim},) or (T, {dim})")
    if not np.isfinite(a).all():
        raise PolicyOutputError("the policy returned an action with NaN or inf")
    return a


def refuse_unservable(agent: Any, name: str) -> None:
    if is_privileged(agent):
        raise ValueError(
            f"agent {name!r} is privileged: it plans on the simulator's scene truth through bind(env), and a "
            "server never has the env. Serve a non-privileged agent (memory, random, a learned policy) or run "
            "this one in-process (vla-rollout agent=" + str(name) + ")"
        )
    if getattr(agent, "name", None) in ("remote", "openpi"):
        raise ValueError(f"agent {name!r} is a client of another server; serve the agent itself")


class AgentSessions:
    """One registry agent per session (see the module doc)."""

    batching = "loop"

    def __init__(self, agent_cfg: dict[str, Any], first: Any = None) -> None:
        self.cfg = dict(agent_cfg)
        self.name = str(self.cfg.get("name"))
        probe = first if first is not None else make_agent(self.cfg)
        refuse_unservable(probe, self.name)
        self._spare = probe  # the probe serves the first session
        self.agents: dict[str, Any] = {}
        self.specs: dict[str, EnvSpec] = {}

    def metadata(self) -> dict[str, Any]:
        agent = self._spare or next(iter(self.agents.values()), None)
        meta = {
            "agent": self.name,
            "model": getattr(agent, "name", self.name),
            "batching": self.batching,
            "action_statistics": None,
            "memory": isinstance(agent, HasLiveMemory),
        }
        if agent is not None and callable(getattr(type(agent), "metadata", None)):
            meta.update(agent.metadata())
        return meta

    def reset(self, session: str, instruction: str, spec: EnvSpec, seed: Any = None) -> None:
        agent = self.agents.get(session)
        if agent is None:
            agent, self._spare = (self._spare, None) if self._spare is not None else (make_agent(self.cfg), None)
            self.agents[session] = agent
        self.specs.pop(session, None)
        if seed is not None and isinstance(agent, Seedable):
            agent.seed(tuple(seed) if isinstance(seed, list) else seed)
        agent.reset(instruction, spec)
        self.specs[session] = spec  # only once the agent accepted the episode

    def _agent(self, session: str) -> Any:
        if session not in self.specs:  # never reset, or its last reset failed
            raise SessionError(f"session {session!r} has no episode: call reset first")
        return self.agents[session]

    def infer_batch(self, sessions: list[str], observations: list[dict[str, Any]]) -> list[Any]:
        out: list[Any] = []
        for s, d in zip(sessions, observations):
            try:
                agent = self._agent(s)
                spec = self.specs[s]
                out.append(check_action(spec, agent.act(check_observation(spec, d))))
            except Exception as exc:  # noqa: BLE001 - one session's failure is its own reply, not the batch's
                out.append(exc)
        return out

    def close(self, session: str) -> None:
        self.agents.pop(session, None)
        self.specs.pop(session, None)

    def live_memory(self, session: str) -> Any:
        agent = self.agents.get(session)
        return agent.live_memory() if isinstance(agent, HasLiveMemory) else None


class ModelSessions:
    """A :class:`BatchModel` with per-session memory inputs (see the module doc)."""

    batching = "model"

    def __init__(
        self, model: BatchModel, memory: Any = None, name: str | None = None, frames: tuple[int, str] | None = None
    ) -> None:
        from ..transforms.map_inputs import MemoryInputsConfig

        self.model = model
        self.memory_cfg = None if memory is None else MemoryInputsConfig.from_any(memory)
        self.frames_cfg = frames  # a memory of frames per session (K, camera): the client sends every step
        self.frames: dict[str, Any] = {}
        self.name = name or getattr(model, "name", None) or type(model).__name__
        self.specs: dict[str, EnvSpec] = {}
        self.inputs: dict[str, Any] = {}

    def metadata(self) -> dict[str, Any]:
        meta = {"agent": self.name, "batching": self.batching, "memory": self.memory_cfg is not None}
        meta.update(self.model.metadata())
        if "action_statistics" not in meta and "statistics" in meta:
            meta["action_statistics"] = meta["statistics"]  # the learned policy's per-dataset statistics
        return meta

    def reset(self, session: str, instruction: str, spec: EnvSpec, seed: Any = None) -> None:
        self.specs.pop(session, None)
        if self.memory_cfg is not None:
            from ..policy import memory_inputs

            inputs = self.inputs.get(session) or memory_inputs(self.memory_cfg)
            if seed is not None:
                inputs.seed(tuple(seed) if isinstance(seed, list) else seed)
            inputs.reset(spec)
            self.inputs[session] = inputs
        if self.frames_cfg is not None:
            from ..transforms.frame_memory import FrameMemory

            self.frames[session] = FrameMemory(*self.frames_cfg)
        self.specs[session] = spec

    def infer_batch(self, sessions: list[str], observations: list[dict[str, Any]]) -> list[Any]:
        out: list[Any] = [None] * len(sessions)
        ready, idx = [], []
        for i, (s, d) in enumerate(zip(sessions, observations)):
            try:
                if s not in self.specs:
                    raise SessionError(f"session {s!r} has no episode: call reset first")
                obs = check_observation(self.specs[s], d)
                if s in self.inputs:
                    obs = self.inputs[s](obs)
                if s in self.frames:
                    obs = self.frames[s](obs)
                ready.append(obs.to_dict() if s in self.inputs or s in self.frames else d)
                idx.append(i)
            except Exception as exc:  # noqa: BLE001 - a bad observation fails its own reply only
                out[i] = exc
        if ready:
            try:
                actions = list(self.model.infer_batch(ready))  # a list, or an array (B, ...) as the VLA returns
                if len(actions) != len(ready):
                    raise RuntimeError(f"the model returned {len(actions)} actions for {len(ready)} observations")
            except Exception as exc:  # noqa: BLE001 - the model failed: every item of this batch gets the error
                actions = [exc] * len(ready)
            for i, a in zip(idx, actions):
                try:
                    out[i] = a if isinstance(a, Exception) else check_action(self.specs[sessions[i]], a)
                except PolicyOutputError as exc:
                    out[i] = exc
        return out

    def close(self, session: str) -> None:
        self.specs.pop(session, None)
        self.inputs.pop(session, None)
        self.frames.pop(session, None)

    def live_memory(self, session: str) -> Any:
        inputs = self.inputs.get(session)
        return inputs.live_memory() if inputs is not None else None


def load_batch_policy(path: str, memory: dict[str, Any] | None = None, device: str = "cpu") -> BatchPolicy:
    """The learned policy from an exported or checkpoint directory (``vla.policy.load_policy``),
    served as a :class:`ModelSessions` (``vla-serve policy_path=DIR``). A policy that reads the memory
    builds, per session, the very memory inputs it was trained with (the checkpoint's ``memory``), as
    ``agent=vla`` does; ``memory`` given here must then be the same config, not another one."""
    from vla.policy import load_policy

    model = load_policy(path, device=device)
    model.eval()
    own = model.config.memory_inputs_config()
    if own is not None:
        from ..transforms.map_inputs import MemoryInputsConfig

        if memory is not None and MemoryInputsConfig.from_any(memory) != own:
            raise ValueError(
                f"{path} reads the memory it was trained with ({own.to_dict()}); memory={memory} would feed it "
                "another: leave memory unset to serve the checkpoint's"
            )
        memory = own
    icfg = model.config.inputs
    frames = (icfg.history, icfg.frames_camera) if icfg.history else None
    return ModelSessions(model, memory, name="vla", frames=frames)


def make_batch_policy(agent_cfg: dict[str, Any], memory: dict[str, Any] | None = None) -> BatchPolicy:
    """The ``BatchPolicy`` for an agent config: the agent itself if it is one, a
    :class:`ModelSessions` if it is a :class:`BatchModel`, else :class:`AgentSessions`."""
    agent = make_agent(agent_cfg)
    name = str(agent_cfg.get("name"))
    refuse_unservable(agent, name)
    if isinstance(agent, BatchPolicy):
        return agent
    if isinstance(agent, BatchModel):
        return ModelSessions(agent, memory)
    return AgentSessions(agent_cfg, first=agent)
