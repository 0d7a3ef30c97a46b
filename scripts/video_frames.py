"""A row of frames from episode videos, for docs: the start, evenly spaced middles and the last frame.

    .venv/bin/python scripts/video_frames.py runs/proof/libero_oft/test/videos/*trial000*.mp4 \
        --frames 4 --out docs/img/proof_libero_oft_trial0.png

Several videos give one row each (same frame count), labelled with the file name.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import imageio.v2 as imageio
import numpy as np


def frames_of(video: Path, n: int) -> list[np.ndarray]:
    """``n`` frames of ``video``: the first, the last and evenly spaced ones between."""
    if n < 2:
        raise ValueError(f"--frames must be >= 2 (the first and the last), got {n}")
    reader = imageio.get_reader(str(video))
    try:
        all_frames = [f for f in reader]
    finally:
        reader.close()
    if not all_frames:
        raise ValueError(f"{video}: no frames")
    idx = np.linspace(0, len(all_frames) - 1, n).round().astype(int)
    return [all_frames[i] for i in idx]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("videos", nargs="+", type=Path)
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    missing = [str(v) for v in a.videos if not v.is_file()]
    if missing:
        print(f"video_frames: no such file(s): {missing}", file=sys.stderr)
        return 2
    rows = [frames_of(v, a.frames) for v in a.videos]
    fig, axes = plt.subplots(len(rows), a.frames, figsize=(3 * a.frames, 3 * len(rows)), squeeze=False)
    for r, (video, frames) in enumerate(zip(a.videos, rows)):
        for c, f in enumerate(frames):
            axes[r][c].imshow(f)
            axes[r][c].axis("off")
        axes[r][0].set_title(video.stem, fontsize=8, loc="left")
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=80)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
