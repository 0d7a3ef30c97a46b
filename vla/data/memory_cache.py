"""``MemoryCache``: the spatial memory's inputs for demonstrations, computed once and kept on disk.

For each episode the memory camera's frames (rgb, depth, instance masks with the episode's labels,
K, T_world_cam) are replayed in order through :class:`~vla.transforms.memory.MemoryInputs` -- reset
with the episode's EnvSpec (a mobile base for the house, an arm for LIBERO: the scale of the memory
follows, as at inference) -- and the ``memory/*`` entries after fusing steps ``0..t`` are stored for
every step ``t``: exactly what the transform adds to observation ``t`` in a rollout.

One HDF5 file per episode under ``root``, named ``<episode>-<key>.hdf5``, where the key hashes the
:class:`MemoryInputsConfig`, the source file's path, size and mtime, the episode and its camera: a
changed config or file gets a new key, so a stale cache is never read. Writes are atomic (a
temporary file, then ``os.replace``), so a killed build loses at most the episodes in flight, and
:meth:`build` skips episodes already cached. Entries are built lazily on first access (in whatever
process asks: a data-loader worker) or eagerly with a progress bar (:meth:`build`, ``workers``
processes).

File layout: one dataset per entry key (``frames``, ``topdown``, ``agent/point``, ``objects/id``,
``text``, ...). Numbers and strings are (T,) datasets; arrays are concatenated along their first
axis with ``_offsets/<key>`` (T+1,) giving step ``t``'s rows (object tables vary in length; a map
is ``H`` rows of one chunk); unicode arrays are stored as UTF-8 strings. Arrays of more than 4 kB
per step are compressed.
"""

from __future__ import annotations

import hashlib
import json
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
from envs.spec import EnvSpec
from spatial_memory.frame import CameraFrame
from vla.transforms.memory import MemoryInputs, MemoryInputsConfig

from .handles import HandlePool, open_hdf5
from .layout import ORIENTATIONS, EpisodeRef, reorient, reorient_K
from .memory_entries import entry_kind, scalar

CACHE_FORMAT = 2  # 2: named objects lead the table (the instruction is passed)
_BLOCK = 32  # frames read from the demonstration file at a time
_COMPRESS_BYTES = 4096
_STR = h5py.string_dtype("utf-8")


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
        self._meta: dict[str, tuple[dict, dict, set]] = {}  # cache file -> (kinds, offsets, unicode keys)

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
                why = " (official LIBERO files have none; record demonstrations with record=DIR)"
                why = why if ref.family == "libero" else ""
                raise ValueError(f"{ref.where(f'obs/{prefix}_{f}')} is missing: the memory needs it{why}")

    def key(self, ref: EpisodeRef) -> str:
        k = (ref.path, ref.group, ref.id)
        if k not in self._keys:
            try:
                st = os.stat(ref.path)
            except OSError as exc:
                raise ValueError(f"{ref.path}: cannot stat the demonstration file: {exc}") from exc
            blob = json.dumps(
                {
                    "format": CACHE_FORMAT,
                    "config": self.config.to_json(),
                    "file": ref.path,
                    "size": st.st_size,
                    "mtime_ns": st.st_mtime_ns,
                    "group": ref.group,
                    "episode": ref.id,
                    "camera": self.camera(ref)[0],
                },
                sort_keys=True,
            )
            self._keys[k] = hashlib.sha256(blob.encode()).hexdigest()[:20]
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
        p = str(path)
        try:
            f = self._pool.file(p)
        except ValueError:  # a damaged cache file is derived data: build it again
            path.unlink(missing_ok=True)
            self.build_episode(ref)
            f = self._pool.file(p)
        if not 0 <= t < ref.length:
            raise IndexError(f"{ref.where()}: step {t} out of range [0, {ref.length})")
        meta = self._meta.get(p)
        if meta is None:
            kinds = json.loads(f.attrs["kinds"])
            offsets = {k: f[f"_offsets/{k}"][()] for k, kind in kinds.items() if kind == "array"}
            unicode = {k for k in offsets if f[k].attrs.get("unicode")}
            meta = self._meta[p] = (kinds, offsets, unicode)
        kinds, offsets, unicode = meta
        out: dict[str, Any] = {}
        for k, kind in kinds.items():
            ds = self._pool.dataset(p, k)
            if kind == "array":
                v = ds[offsets[k][t] : offsets[k][t + 1]]
                out[k] = np.array([s.decode() for s in v], dtype=np.str_) if k in unicode else v
            else:
                out[k] = scalar(kind, ds[t])
        return out

    # ------------------------------------------------------------------ building
    def build_episode(self, ref: EpisodeRef) -> dict[str, Any]:
        """Replay one episode through the memory and write its cache file (atomically)."""
        self.check(ref)
        cam, prefix = self.camera(ref)
        path = self.path(ref)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        t0 = time.perf_counter()
        inputs = MemoryInputs(self.config, seed=zlib.crc32(ref.id.encode()))
        inputs.reset(EnvSpec.from_dict(ref.spec))
        obs_camera = self.config.camera or cam
        try:
            with open_hdf5(ref.path) as src, h5py.File(tmp, "w") as out:
                writer = _EntryWriter(out, self.compression)
                for frame in _frames(src, ref, prefix):
                    obs = Observation(
                        cameras={obs_camera: frame}, state=np.zeros(0), instruction=ref.instruction, step=frame.step
                    )
                    inputs.integrate(obs)
                    writer.append(inputs.entries(obs.instruction))  # as the live transform: named objects first
                writer.flush()
                if writer.steps != ref.length:
                    raise ValueError(f"{ref.where()}: replayed {writer.steps} frames, expected {ref.length}")
                out.attrs.update(
                    format=CACHE_FORMAT,
                    key=self.key(ref),
                    config=self.config.to_json(),
                    source=ref.path,
                    group=ref.group,
                    episode=ref.id,
                    camera=cam,
                    length=ref.length,
                    kinds=json.dumps(writer.kinds),
                )
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
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


class _EntryWriter:
    """Collects steps' entries and appends them to resizable datasets, ``flush_every`` steps at a
    time (one h5py write per key and block: per-step writes cost more than the memory itself)."""

    def __init__(self, f: h5py.File, compression: str, flush_every: int = 64) -> None:
        self.f, self.compression, self.flush_every = f, compression, int(flush_every)
        self.kinds: dict[str, str] = {}
        self.steps = 0  # steps appended (flushed or not)
        self._buffer: dict[str, list[Any]] = {}
        self._written = 0  # steps flushed

    def _create(self, k: str, value: Any) -> None:
        kind = entry_kind(k, value)
        self.kinds[k] = kind
        if kind == "array":
            unicode = value.dtype.kind == "U"
            rest = value.shape[1:]
            big = not unicode and value.nbytes > _COMPRESS_BYTES
            chunks = (max(value.shape[0], 1),) + rest if big else True
            ds = self.f.create_dataset(
                k, shape=(0,) + rest, maxshape=(None,) + rest, dtype=_STR if unicode else value.dtype,
                chunks=chunks, compression=self.compression if big else None,
            )  # fmt: skip
            ds.attrs["unicode"] = unicode
            self.f.create_dataset(f"_offsets/{k}", shape=(1,), maxshape=(None,), dtype=np.int64, chunks=True)
        else:
            dtype = {"str": _STR, "bool": np.bool_, "int": np.int64, "float": np.float64}[kind]
            self.f.create_dataset(k, shape=(0,), maxshape=(None,), dtype=dtype, chunks=True)

    def append(self, entries: dict[str, Any]) -> None:
        if self.steps == 0:
            for k, v in entries.items():
                self._create(k, v)
                self._buffer[k] = []
        if set(entries) != set(self.kinds):
            raise ValueError(
                f"memory entries changed keys at step {self.steps}: {sorted(entries)} vs {sorted(self.kinds)}"
            )
        for k, v in entries.items():
            self._buffer[k].append(v)
        self.steps += 1
        if self.steps - self._written >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        n_new = self.steps - self._written
        if n_new == 0:
            return
        for k, rows in self._buffer.items():
            ds = self.f[k]
            if self.kinds[k] == "array":
                lengths = np.array([len(r) for r in rows], dtype=np.int64)
                block = np.concatenate(rows)
                if block.dtype.kind == "U":
                    block = block.astype(object)
                n = ds.shape[0]
                ds.resize(n + len(block), axis=0)
                if len(block):
                    ds[n:] = block
                off = self.f[f"_offsets/{k}"]
                off.resize(self.steps + 1, axis=0)
                off[self._written + 1 :] = n + np.cumsum(lengths)
            else:
                ds.resize(self.steps, axis=0)
                ds[self._written :] = np.array(rows, dtype=object if self.kinds[k] == "str" else ds.dtype)
            rows.clear()
        self._written = self.steps
