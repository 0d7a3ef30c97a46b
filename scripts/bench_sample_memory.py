#!/usr/bin/env python
"""What a training data source costs in memory and time as it samples: ``DemoSource.sample`` at random
over recorded demonstrations (as a data-loader worker reads them), the process's resident memory and
the mean time per sample every ``--samples / 8`` samples. ``--chunk-cache BYTES`` opens the files with
that HDF5 chunk cache per dataset instead of the pool's (0: none; ``default``: h5py's, 8 MiB). Compare
the settings in one sitting (docs/BENCHMARKS.md, "Training data")::

    .venv/bin/python scripts/bench_sample_memory.py "runs/experiments/libero_spatial_suite/demos/*_demo.hdf5" \\
        --samples 4000 --chunk-cache default
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_gb() -> float:
    status = Path(f"/proc/{os.getpid()}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", help="a glob of *_demo.hdf5 files (quoted)")
    p.add_argument("--samples", type=int, default=4000)
    p.add_argument("--cameras", default="agentview,wrist")
    p.add_argument("--chunk-cache", default=None, help="bytes per dataset, or 'default' (h5py's); unset: the pool's")
    a = p.parse_args(argv)
    files = sorted(glob.glob(a.paths))
    if not files:
        p.error(f"no file matches {a.paths!r}")
    import numpy as np

    import vla.data.handles as handles
    from vla.config import compose
    from vla.train.config import DataConfig
    from vla.train.data import build_sources

    if a.chunk_cache is not None:
        nbytes = None if a.chunk_cache == "default" else int(a.chunk_cache)
        opener = handles.open_hdf5
        handles.open_hdf5 = lambda path, chunk_cache_bytes=None: opener(path, nbytes)
    cfg = compose(
        "train", ["model=tiny_qwen2_5_vl", "policy=libero_oft", "data=libero", f"data.paths=[{','.join(files)}]"]
    )
    cameras = tuple(a.cameras.split(","))
    (src, *_), *_ = build_sources(DataConfig(**cfg["data"]), 8, None, ROOT / "runs" / "tmp_cache", 0, cameras, None)
    rng = np.random.default_rng(0)
    rows, t0, every = [], time.perf_counter(), max(1, a.samples // 8)
    start = rss_gb()
    for i in range(a.samples):
        src.sample(int(rng.integers(len(src))))
        if (i + 1) % every == 0:
            ms = (time.perf_counter() - t0) * 1000 / (i + 1)
            rows.append({"samples": i + 1, "rss_gb": round(rss_gb(), 2), "ms_per_sample": round(ms, 2)})
            print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"files": len(files), "chunk_cache": a.chunk_cache or "pool", "rss_gb_at_start": round(start, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
