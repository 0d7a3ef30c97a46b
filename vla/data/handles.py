"""Read-only HDF5 handles opened lazily, one set per process (sources survive pickling and ``fork``).

A data loader forks workers (or pickles the source into them). h5py handles must not cross a fork:
:class:`HandlePool` notices a new process id and starts afresh, and pickles without its handles.
At most ``max_open`` files stay open (least recently used closed first); dataset objects are cached
per open file, since looking one up costs more than reading a small row.

The pool's files have no chunk cache (``rdcc_nbytes=0``): a training sample reads one frame of each
camera, one chunk each (the recordings chunk by step), and the next sample almost never wants the same
chunk, while h5py keeps up to 8 MiB of chunks per open dataset by default. Across the thousands of datasets of a
suite's recording that grew a data-loader worker to 9.4 GB (killed for memory at step 7,950 of
libero_spatial_suite's training); without it the worker stays flat and reads a sample faster
(docs/BENCHMARKS.md, "Training data").
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

import h5py


def open_hdf5(path: str, chunk_cache_bytes: int | None = None) -> h5py.File:
    """``h5py.File(path, "r")``; a missing, truncated or corrupted file raises ``ValueError`` naming it.
    ``chunk_cache_bytes``: each dataset's chunk cache (None: h5py's default, 8 MiB)."""
    try:
        return h5py.File(path, "r", rdcc_nbytes=chunk_cache_bytes)
    except FileNotFoundError as exc:
        raise ValueError(f"{path}: no such file") from exc
    except OSError as exc:
        raise ValueError(f"{path}: not a readable HDF5 file (truncated or corrupted?): {exc}") from exc


class HandlePool:
    def __init__(self, max_open: int = 64) -> None:
        self.max_open = int(max_open)
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._files: OrderedDict[str, h5py.File] = OrderedDict()
        self._datasets: dict[str, dict[str, Any]] = {}

    def _check_process(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's handles are not ours to use
            self._reset()

    def file(self, path: str) -> h5py.File:
        self._check_process()
        f = self._files.get(path)
        if f is not None:
            self._files.move_to_end(path)
            return f
        f = open_hdf5(path, chunk_cache_bytes=0)  # random frames: a chunk cache only grows (module doc)
        self._files[path] = f
        self._datasets[path] = {}
        while len(self._files) > self.max_open:
            old, handle = self._files.popitem(last=False)
            self._datasets.pop(old, None)
            handle.close()
        return f

    def dataset(self, path: str, name: str) -> Any:
        """The dataset (or group) ``name`` of file ``path``; ``KeyError`` if it does not exist."""
        f = self.file(path)
        cache = self._datasets[path]
        ds = cache.get(name)
        if ds is None:
            ds = cache[name] = f[name]
        return ds

    def forget(self, path: str) -> None:
        """Close ``path`` if open (e.g. before the file is replaced)."""
        self._check_process()
        handle = self._files.pop(path, None)
        self._datasets.pop(path, None)
        if handle is not None:
            handle.close()

    def close(self) -> None:
        self._check_process()
        for handle in self._files.values():
            handle.close()
        self._reset()

    def __getstate__(self) -> dict[str, Any]:
        return {"max_open": self.max_open}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.max_open = state["max_open"]
        self._reset()
