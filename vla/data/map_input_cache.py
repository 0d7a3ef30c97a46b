"""``MemoryCache``: the spatial memory's inputs for demonstrations, computed once and kept on disk.

For each episode the memory camera's frames (rgb, depth, instance masks with the episode's labels,
K, T_world_cam) are replayed in order through :class:`~vla.transforms.map_inputs.MemoryInputs` -- reset
with the episode's EnvSpec (a mobile base for the house, an arm for LIBERO: the scale of the memory
follows, as at inference) -- and the ``memory/*`` entries after fusing steps ``0..t`` are stored for
every step ``t``: exactly what the transform adds to observation ``t`` in a rollout.

One HDF5 file per episode under ``root``, named ``<episode>-<key>.hdf5``, where the key
(:func:`~vla.transforms.entry_format.memory_key`) hashes the :class:`MemoryInputsConfig`, the source file's
path, size and mtime, the episode and its camera: a changed config or file gets a new key, and a file
whose stored identity is not its name's is built again, so a stale cache is never read. Writes are
atomic, so a killed build loses at most the episodes in flight, and :meth:`build` skips episodes
already cached. Entries are built lazily on first access (in whatever process asks: a data-loader
worker) or eagerly with a progress bar (:meth:`build`, ``workers`` processes). The file format is
the one both memory caches share (:mod:`vla.transforms.entry_format`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Iterable

import h5py
import numpy as np
from tqdm import tqdm

from envs.observation import Observation
from envs.registry import demo_layout
from envs.spec import EnvSpec
from spatial_memory.frame import CameraFrame
from vla.policy import memory_inputs
from vla.transforms.map_inputs import MemoryInputsConfig
from vla.transforms.entry_format import EntryFile, memory_key, write_entries

from .handles import HandlePool, open_hdf5
from envs.orientation import ORIENTATIONS, reorient, reorient_K

from .layout import EpisodeRef

_BLOCK = 32  # frames read from the demonstration file at a time


class MemoryCache:
    def __init__(
        self,
        root: str | Path,
        config: MemoryInputsConfig | dict | None = None,
        *,
        compression: str = "lzf",
        max_open: int = 64,
    ) -> None:
        self.root = Path(root)
        self.config = MemoryInputsConfig.from_any(config)
        if compression not in ("lzf", "gzip"):
            raise ValueError(f"MemoryCache compression must be 'lzf' or 'gzip', got {compression!r}")
        self.compression = compression
        self._pool = HandlePool(max_open)
        self._keys: dict[tuple[str, str, str], str] = {}
        self._meta: dict[str, EntryFile] = {}  # cache file -> what reading it needs

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "config": self.config, "compression": self.compression, "_pool": self._pool}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._keys, self._meta = {}, {}

    # ------------------------------------------------------------------ which camera, which file
    def camera(self, ref: EpisodeRef) -> tuple[str, str]:
        """(camera name, dataset prefix) of the camera the memory fuses in this episode."""
        name = self.config.camera
        if name is None:
            if not ref.cameras:
                raise ValueError(f"{ref.where()}: the memory needs a camera but this episode records none")
            return next(iter(ref.cameras.items()))
        if name in ref.cameras:
            return name, ref.cameras[name]
        for cam, prefix in ref.cameras.items():
            if prefix == name:
                return cam, prefix
        raise ValueError(
            f"{ref.where(f'obs/{name}_rgb')} is missing: the memory camera {name!r} is not among {sorted(ref.cameras)}"
        )

    def check(self, ref: EpisodeRef) -> None:
        """``ValueError`` unless the episode has what the memory fuses: metric depth, K and T_world_cam."""
        cam, prefix = self.camera(ref)
        for f in ("depth", "K", "T_world_cam"):
            if f not in ref.camera_fields[cam]:
                hint = demo_layout(ref.family).missing_metric_hint
                why = f" ({hint})" if hint else ""
                raise ValueError(f"{ref.where(f'obs/{prefix}_{f}')} is missing: the memory needs it{why}")

    def key(self, ref: EpisodeRef) -> str:
        k = (ref.path, ref.group, ref.id)
        if k not in self._keys:
            try:
                st = os.stat(ref.path)
            except OSError as exc:
                raise ValueError(f"{ref.path}: cannot stat the demonstration file: {exc}") from exc
            self._keys[k] = memory_key(
                self.config,
                file=ref.path,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                group=ref.group,
                episode=ref.id,
                camera=self.camera(ref)[0],
            )
        return self._keys[k]

    def path(self, ref: EpisodeRef) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", ref.id)[:100]
        return self.root / f"{safe}-{self.key(ref)}.hdf5"

    def has(self, ref: EpisodeRef) -> bool:
        return self.path(ref).exists()

    # ------------------------------------------------------------------ reading
    def entries(self, ref: EpisodeRef, t: int) -> dict[str, Any]:
        """The ``memory/*`` entries (without the prefix) of step ``t``; builds the episode if needed."""
        path = self.path(ref)
        if not path.exists():
            self.build_episode(ref)
        if not 0 <= t < ref.length:
            raise IndexError(f"{ref.where()}: step {t} out of range [0, {ref.length})")
        p = str(path)
        meta = self._meta.get(p)
        if meta is None:
            try:
                meta = self._meta[p] = self._open(ref, p)
            except ValueError:  # damaged, or not this episode's entries: derived data, built again
                self._pool.forget(p)
                path.unlink(missing_ok=True)
                self.build_episode(ref)
                meta = self._meta[p] = self._open(ref, p)
        return meta.read_step(lambda k: self._pool.dataset(p, k), t)

    def _open(self, ref: EpisodeRef, p: str) -> EntryFile:
        meta = EntryFile(self._pool.file(p), self.key(ref))
        if meta.steps != ref.length:
            raise ValueError(f"{p}: {meta.steps} steps of memory entries, but the episode has {ref.length}")
        return meta

    # ------------------------------------------------------------------ building
    def build_episode(self, ref: EpisodeRef) -> dict[str, Any]:
        """Replay one episode through the memory and write its cache file (atomically)."""
        self.check(ref)
        cam, prefix = self.camera(ref)
        path = self.path(ref)
        t0 = time.perf_counter()
        inputs = memory_inputs(self.config, seed=zlib.crc32(ref.id.encode()))
        inputs.reset(EnvSpec.from_dict(ref.spec))
        obs_camera = self.config.camera or cam

        def steps() -> Iterable[dict[str, Any]]:
            with open_hdf5(ref.path) as src:
                obs_group = src[ref.group]["obs"]  # a base's bump flags, as the live transform sees them
                blocked = obs_group["blocked"][()] if "blocked" in obs_group else np.zeros(ref.length, dtype=bool)
                for t, frame in enumerate(_frames(src, ref, prefix)):
                    obs = Observation(
                        cameras={obs_camera: frame},
                        state=np.zeros(0),
                        sensors={"blocked": bool(blocked[t])},
                        instruction=ref.instruction,
                        step=frame.step,
                    )
                    inputs.integrate(obs)
                    yield inputs.entries(obs.instruction)  # as the live transform: named objects first

        self._pool.forget(str(path))
        attrs = dict(source=ref.path, group=ref.group, episode=ref.id, camera=cam, length=ref.length)
        write_entries(path, steps(), self.key(ref), self.config, attrs, self.compression, expect=ref.length)
        self._pool.forget(str(path))
        self._meta.pop(str(path), None)
        return {"episode": ref.id, "frames": ref.length, "seconds": time.perf_counter() - t0}

    def build(self, source: Any, workers: int = 0, progress: bool = True) -> dict[str, Any]:
        """Build every episode of ``source`` (a DemoSource, or EpisodeRefs) not cached yet.

        ``workers`` > 0: that many forked processes. Returns counts, frames built and frames/s."""
        refs: list[EpisodeRef] = list(source.episode_refs() if hasattr(source, "episode_refs") else source)
        for r in refs:
            self.check(r)
        todo = [r for r in refs if not self.has(r)]
        t0 = time.perf_counter()
        frames = 0
        bar = tqdm(
            total=sum(r.length for r in todo), unit="frame", desc="memory cache", disable=not progress, file=sys.stderr
        )
        try:
            if int(workers) > 0 and len(todo) > 1:
                with mp.get_context("fork").Pool(int(workers)) as pool:
                    for res in pool.imap_unordered(self.build_episode, todo):
                        frames += res["frames"]
                        bar.update(res["frames"])
            else:
                for r in todo:
                    frames += self.build_episode(r)["frames"]
                    bar.update(r.length)
        finally:
            bar.close()
        seconds = time.perf_counter() - t0
        return {
            "episodes": len(refs),
            "built": len(todo),
            "skipped": len(refs) - len(todo),
            "frames": frames,
            "seconds": seconds,
            "frames_per_s": frames / seconds if frames and seconds > 0 else None,
        }


def _frames(src: h5py.File, ref: EpisodeRef, prefix: str) -> Iterable[CameraFrame]:
    """The memory camera's frames of one episode, read a block at a time, in the orientation the
    recording env delivered them (its EnvSpec's ``info["orientation"]``; official files store the
    OpenGL buffer), so the cache integrates exactly what the live transform did."""
    obs = src[ref.group]["obs"]
    live = (ref.spec.get("info") or {}).get("orientation") if ref.orientation is not None else None
    wanted = live if live in ORIENTATIONS else None

    def turned(x: np.ndarray) -> np.ndarray:
        return reorient(x, ref.orientation, wanted)

    names = ["rgb", "depth", "K", "T_world_cam"] + (["instance"] if f"{prefix}_instance" in obs else [])
    for start in range(0, ref.length, _BLOCK):
        block = {}
        for n in names:
            key = f"obs/{prefix}_{n}"
            try:
                block[n] = obs[f"{prefix}_{n}"][start : start + _BLOCK]
            except KeyError as exc:
                raise ValueError(f"{ref.where(key)} is missing") from exc
            except OSError as exc:
                raise ValueError(f"{ref.where(key)}: cannot read steps {start}.. (corrupted file?): {exc}") from exc
        for j in range(len(block["rgb"])):
            hw = block["rgb"][j].shape[:2]
            try:
                yield CameraFrame(
                    rgb=turned(block["rgb"][j]),
                    depth=turned(np.asarray(block["depth"][j], dtype=np.float32)),
                    K=reorient_K(block["K"][j], hw, ref.orientation, wanted),
                    T_world_cam=block["T_world_cam"][j],
                    instance=turned(np.asarray(block["instance"][j], dtype=np.int32)) if "instance" in block else None,
                    labels=ref.labels,
                    step=start + j,
                )
            except ValueError as exc:
                where = ref.where(f"obs/{prefix}_*")
                raise ValueError(f"{where}: step {start + j} is not a valid frame: {exc}") from exc
