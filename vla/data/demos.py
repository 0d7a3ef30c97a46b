"""``DemoSource``: demonstrations (HDF5, the recorder's layout or LIBERO's official one) as action samples.

Sample ``i`` is step ``t`` of some episode: ``obs`` is the observation on which action ``t`` was
taken, in the :meth:`~envs.observation.Observation.to_dict` layout --

    prompt                        the episode's instruction (see ``vla/data/layout.py``); with
                                  ``instructions="shuffled"`` one of the source's instructions drawn per
                                  sample (the control of a language-conditioned policy)
    step                          t
    state                         obs/state (official LIBERO files: ee_states + gripper_states, float32)
    cameras/<cam>/<field>         the chosen cameras' chosen fields (``camera_fields``; default rgb only;
                                  all of rgb, depth, K, T_world_cam make a frame Observation.from_dict reads)
    cameras/<cam>/label_ids|label_names   with the instance field: the episode's instance labels
    sensors/<key>                 the env's sensors (house: blocked, motion; LIBERO: joint_states, ..., robot_state)
    memory/<key>                  with ``memory=MemoryCache(...)``: the spatial memory after fusing 0..t
    memory/frames/<i>             with ``frames=(K, camera)``: K earlier rgb frames of that camera, the
                                  episode's first and K-1 more up to t (``vla.transforms.frame_memory``)

-- and ``actions`` is ``(chunk, D)``: ``a_t .. a_{t+chunk-1}``, the last action repeated past the
episode's end. Camera names are the env's (``agentview``, ``wrist``, ``ego``); a file prefix
(``eye_in_hand``) is accepted too.

Orientation: LIBERO images are delivered in ``orientation`` (default ``"rot180"``, the protocol's,
what the env gives a policy). The recorder stores the env's images and says how
(``image_orientation``): those pass unchanged. Official files store the simulator's raw OpenGL
buffer (``macros_image_convention = "opengl"``) and are turned once; ``orientation=None`` delivers
what is stored. Other families' images are never turned.

Files are opened lazily, per process (:class:`~vla.data.handles.HandlePool`), so the source can be
pickled into or forked with data-loader workers; only attributes, shapes and actions are read up front.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from envs.registry import demo_layout
from envs.spec import EnvSpec

from .handles import HandlePool
from envs.orientation import ORIENTATIONS, reorient, reorient_K

from .layout import CAMERA_FIELDS, EpisodeRef, find_demo_files, read_episodes
from .layout import unique_ids
from .sample import Sample, check_episodes, check_index

_IMAGE_FIELDS = ("rgb", "depth", "instance")
INSTRUCTIONS = ("own", "shuffled")  # data.instructions


def shuffled(texts: Sequence[str], episode: str, t: int) -> str:
    """The shuffled-instruction control's prompt for step ``t`` of ``episode``: one of ``texts`` drawn
    uniformly by a hash of both (the same sample, the same prompt; a policy can learn nothing about the
    task from it). Python's ``hash`` is salted per process, so blake2b."""
    h = int.from_bytes(hashlib.blake2b(f"{episode}:{t}".encode(), digest_size=8).digest(), "little")
    return texts[h % len(texts)]


class DemoSource:
    def __init__(
        self,
        paths: str | Path | Iterable[str | Path],
        key: str | None,
        chunk: int = 1,
        cameras: Sequence[str] = ("agentview",),
        memory: Any = None,
        *,
        camera_fields: Sequence[str] = ("rgb",),
        orientation: str | None = "rot180",
        max_open: int = 64,
        frames: tuple[int, str] | None = None,
        instructions: str = "own",
    ) -> None:
        if instructions not in INSTRUCTIONS:
            raise ValueError(f"instructions must be one of {INSTRUCTIONS}, got {instructions!r}")
        refs, actions = [], []
        for path in find_demo_files(paths):
            for ref, a in read_episodes(path):
                refs.append(ref)
                actions.append(a)
        unique_ids(refs)
        if key is None:  # the default: the episodes' env family (one family per source)
            families = sorted({r.family for r in refs})
            if not families:
                raise ValueError(f"DemoSource: no episodes in {list(paths)}")
            if len(families) != 1:
                raise ValueError(f"DemoSource: episodes of several env families {families}: name a dataset key")
            key = families[0]
        self._setup(key, refs, actions, chunk, cameras, memory, camera_fields, orientation, max_open, frames)
        # the shuffled-instruction control: each sample's prompt drawn from every episode's instruction
        self.instructions, self._texts = instructions, sorted({r.instruction for r in refs})

    def _setup(
        self, key, refs, actions, chunk, cameras, memory, camera_fields, orientation, max_open, frames=None
    ) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError(f"DemoSource needs a dataset key (a non-empty string), got {key!r}")
        if int(chunk) < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        if orientation is not None and orientation not in ORIENTATIONS:
            raise ValueError(f"orientation must be one of {ORIENTATIONS} or None, got {orientation!r}")
        bad = sorted(set(camera_fields) - set(CAMERA_FIELDS))
        if bad or "rgb" not in camera_fields:
            raise ValueError(
                f"camera_fields must include 'rgb' and be among {CAMERA_FIELDS}, got {list(camera_fields)}"
            )
        self.key, self.chunk, self.memory = key, int(chunk), memory
        self.cameras, self.camera_fields = tuple(cameras), tuple(camera_fields)
        self.orientation, self.max_open = orientation, int(max_open)
        self._refs: list[EpisodeRef] = list(refs)
        self._episode_actions = list(actions)
        first = actions[0].shape[1] if actions else 0
        odd = next((e for e, a in enumerate(actions) if a.shape[1] != first), None)
        if odd is not None:
            raise ValueError(
                f"{refs[odd].where('actions')} has {actions[odd].shape[1]} dimensions but "
                f"{refs[0].where('actions')} has {first}: one source holds one action space"
            )
        self._cams = [self._resolve_cameras(r) for r in self._refs]
        self.frames = None if frames is None else (int(frames[0]), str(frames[1]))
        if self.frames is not None:
            k, cam = self.frames
            if k < 1 or cam not in self.cameras:
                raise ValueError(
                    f"frames=(K, camera) needs K >= 1 and one of the source's cameras {list(self.cameras)}, "
                    f"got {frames}"
                )
        lengths = np.array([r.length for r in self._refs], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._all_actions = np.concatenate(actions) if actions else np.zeros((0, 0))
        self._by_id = {r.id: e for e, r in enumerate(self._refs)}
        if memory is not None:
            for r in self._refs:
                memory.check(r)
        self._pool = HandlePool(self.max_open)

    def _resolve_cameras(self, ref: EpisodeRef) -> list[tuple[str, str]]:
        """(camera name, dataset prefix) for each requested camera; ``ValueError`` if one is missing."""
        out = []
        for name in self.cameras:
            cam = name if name in ref.cameras else next((c for c, p in ref.cameras.items() if p == name), None)
            if cam is None:
                raise ValueError(
                    f"{ref.where(f'obs/{name}_rgb')} is missing: this episode has cameras "
                    f"{sorted(ref.cameras)} (choose with DemoSource(cameras=...))"
                )
            missing = [f for f in self.camera_fields if f not in ref.camera_fields[cam]]
            if missing:
                prefix = ref.cameras[cam]
                hint = demo_layout(ref.family).missing_metric_hint
                why = f" ({hint})" if hint and ref.camera_fields[cam] == ("rgb",) else ""
                raise ValueError(f"{ref.where(f'obs/{prefix}_{missing[0]}')} is missing{why}")
            out.append((cam, ref.cameras[cam]))
        return out

    # ------------------------------------------------------------------ SampleSource
    def __len__(self) -> int:
        return int(self._starts[-1])

    def episodes(self) -> list[str]:
        return [r.id for r in self._refs]

    def _locate(self, i: int) -> tuple[int, int]:
        e = int(np.searchsorted(self._starts, i, side="right")) - 1
        return e, i - int(self._starts[e])

    def episode_of(self, i: int) -> str:
        return self._refs[self._locate(check_index(self, i))[0]].id

    def actions(self) -> np.ndarray:
        return self._all_actions.copy()

    def states(self, keys: tuple[str, ...] = ("state",)) -> np.ndarray:
        """Every step's proprio vector, in sample order (the statistics of ``inputs.proprio=token``): the
        observation ``keys`` concatenated, ``"state"`` or ``"sensors/<name>"``."""
        rows = [np.concatenate([self._episode_column(r, k) for k in keys], axis=1) for r in self._refs]
        return np.concatenate(rows) if rows else np.zeros((0, 0))

    def _episode_column(self, ref: EpisodeRef, key: str) -> np.ndarray:
        if key == "state":
            return self._episode_states(ref)
        name = key.removeprefix("sensors/")
        if name not in ref.sensors:
            raise ValueError(f"{ref.where(f'obs/{name}')} is missing: the policy reads {key} (inputs.proprio_keys)")
        where = "robot_states" if name == "robot_state" else f"obs/{name}"  # as sample() reads it
        try:
            x = np.asarray(self._pool.dataset(ref.path, f"{ref.group}/{where}")[:], dtype=np.float64)
        except KeyError as exc:
            raise ValueError(f"{ref.where(where)} is missing") from exc
        return x.reshape(len(x), -1)

    def _episode_states(self, ref: EpisodeRef) -> np.ndarray:
        try:
            if ref.state == "obs/state":
                return np.asarray(self._pool.dataset(ref.path, f"{ref.group}/obs/state")[:], dtype=np.float64)
            parts = [self._pool.dataset(ref.path, f"{ref.group}/obs/{k}")[:] for k in ref.state.split("+")]
        except KeyError as exc:
            raise ValueError(f"{ref.where(ref.state)} is missing: {exc}") from exc
        return np.concatenate(parts, axis=1).astype(np.float64)

    def subset(self, episodes: set[str]) -> "DemoSource":
        keep = check_episodes(self, episodes)
        idx = [e for e, r in enumerate(self._refs) if r.id in keep]
        out = object.__new__(DemoSource)
        out._setup(
            self.key,
            [self._refs[e] for e in idx],
            [self._episode_actions[e] for e in idx],
            self.chunk,
            self.cameras,
            self.memory,
            self.camera_fields,
            self.orientation,
            self.max_open,
            self.frames,
        )
        out.instructions, out._texts = self.instructions, self._texts  # the whole source's instructions
        return out

    def sample(self, i: int) -> Sample:
        e, t = self._locate(check_index(self, i))
        ref = self._refs[e]
        prompt = ref.instruction if self.instructions == "own" else shuffled(self._texts, ref.id, t)
        obs: dict[str, Any] = {"prompt": prompt, "step": t, "state": self._state(ref, t)}
        for cam, prefix in self._cams[e]:
            obs.update(self._camera(ref, cam, prefix, t))
        for k in ref.sensors:
            v = self._read(ref, "robot_states" if k == "robot_state" else f"obs/{k}", t)
            obs[f"sensors/{k}"] = v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v
        if self.memory is not None:
            obs.update({f"memory/{k}": v for k, v in self.memory.entries(ref, t).items()})
        if self.frames is not None:
            from vla.transforms.frame_memory import frame_entries

            k, cam = self.frames
            prefix = dict(self._cams[e])[cam]
            rgb = f"cameras/{cam}/rgb"
            read = lambda s: obs[rgb] if s == t else self._camera(ref, cam, prefix, s)[rgb]  # noqa: E731
            obs.update({f"memory/{key}": v for key, v in frame_entries(read, t, k).items()})
        steps = np.minimum(np.arange(t, t + self.chunk), ref.length - 1)
        return Sample(
            dataset=self.key, episode=ref.id, kind="action", obs=obs, actions=self._episode_actions[e][steps].copy()
        )

    # ------------------------------------------------------------------ more than the protocol
    def episode_range(self, episode: str) -> range:
        """The sample indices of one episode, in step order."""
        e = self._by_id[check_episodes(self, {episode}).pop()]
        return range(int(self._starts[e]), int(self._starts[e + 1]))

    def episode_ref(self, episode: str) -> EpisodeRef:
        return self._refs[self._by_id[check_episodes(self, {episode}).pop()]]

    def spec(self, episode: str) -> EnvSpec:
        """The EnvSpec of an episode as the file says or implies (LIBERO: ``info["orientation"]`` is
        the orientation samples are delivered in)."""
        ref = self.episode_ref(episode)
        d = dict(ref.spec)
        if ref.orientation is not None:
            d["info"] = {**d.get("info", {}), "orientation": self.orientation or ref.orientation}
        return EnvSpec.from_dict(d)

    def build_memory(self, workers: int = 0, progress: bool = True) -> dict[str, Any]:
        """Build the memory cache of every episode now (see :meth:`MemoryCache.build`)."""
        if self.memory is None:
            raise ValueError("this DemoSource has no memory cache (DemoSource(memory=MemoryCache(...)))")
        return self.memory.build(self, workers=workers, progress=progress)

    def episode_refs(self) -> list[EpisodeRef]:
        return list(self._refs)

    def close(self) -> None:
        self._pool.close()

    # ------------------------------------------------------------------ reading
    def _read(self, ref: EpisodeRef, key: str, t: int) -> np.ndarray:
        try:
            return self._pool.dataset(ref.path, f"{ref.group}/{key}")[t]
        except KeyError as exc:
            raise ValueError(f"{ref.where(key)} is missing") from exc
        except OSError as exc:
            raise ValueError(f"{ref.where(key)}: cannot read step {t} (corrupted file?): {exc}") from exc

    def _state(self, ref: EpisodeRef, t: int) -> np.ndarray:
        if ref.state == "obs/state":
            return np.asarray(self._read(ref, "obs/state", t))
        return np.concatenate([self._read(ref, f"obs/{k}", t) for k in ref.state.split("+")]).astype(np.float32)

    def _camera(self, ref: EpisodeRef, cam: str, prefix: str, t: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        p = f"cameras/{cam}/"
        shape = None
        for f in self.camera_fields:
            v = np.asarray(self._read(ref, f"obs/{prefix}_{f}", t))
            if f in _IMAGE_FIELDS:
                shape = v.shape[:2]
                v = reorient(v, ref.orientation, self.orientation)
            out[p + f] = v
        if p + "K" in out:
            hw = shape or out[p + "rgb"].shape[:2]
            out[p + "K"] = reorient_K(out[p + "K"], hw, ref.orientation, self.orientation)
        if p + "instance" in out:
            ids = sorted(ref.labels)
            out[p + "label_ids"] = np.asarray(ids, dtype=np.int32)
            out[p + "label_names"] = np.asarray([ref.labels[i] for i in ids], dtype=np.str_)
        return out

    def __repr__(self) -> str:
        return f"DemoSource({self.key!r}: {len(self._refs)} episodes, {len(self)} samples, chunk {self.chunk})"
