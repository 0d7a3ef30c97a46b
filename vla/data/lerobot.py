"""LeRobot v3.0 datasets on a local path, written and read without lerobot (it cannot share this
environment: it pins torch < 2.11).

Layout (LeRobot's documented v3 format)::

    meta/info.json                                  codebase_version "v3.0", fps, features, path templates
    meta/stats.json                                 per feature: min, max, mean, std, count (q01, q99)
    meta/tasks.parquet                              one row per task: task_index, indexed by the task string
    meta/episodes/chunk-000/file-000.parquet        per episode: episode_index, tasks, length,
                                                    dataset_from_index, dataset_to_index, data/chunk_index,
                                                    data/file_index, videos/<key>/{chunk_index, file_index,
                                                    from_timestamp, to_timestamp}, stats/<feature>/<stat>
    data/chunk-000/file-000.parquet                 one row per frame: observation.state, action,
                                                    timestamp, frame_index, episode_index, index, task_index
    videos/<key>/chunk-000/file-000.mp4             the frames of several episodes, one after another

Several episodes share a data file and a video file; the episode table says where each one is.
Features, as LeRobot's LIBERO datasets name them: ``observation.images.image`` (the agentview
camera) and ``observation.images.wrist_image``, 256 x 256, in the evaluation protocol's
orientation; ``observation.state`` (8) and ``action`` (7). Videos are H.264 (yuv420p), so frames
come back close to, not equal to, what was written. The reader also accepts the other names in
use (``image`` / ``wrist_image`` / ``state`` / ``actions``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .episode import DemoEpisode

CODEBASE_VERSION = "v3.0"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_KEYS = {"agentview": "observation.images.image", "wrist": "observation.images.wrist_image"}
ALIASES = {
    "agentview": ("observation.images.image", "image", "observation.images.agentview", "observation.images.front"),
    "wrist": ("observation.images.wrist_image", "wrist_image", "observation.images.wrist", "observation.images.image2"),
    "state": ("observation.state", "state"),
    "action": ("action", "actions"),
}
FRAME_COLUMNS = ("observation.state", "action", "timestamp", "frame_index", "episode_index", "index", "task_index")
STATE_NAMES = ["x", "y", "z", "axis_angle1", "axis_angle2", "axis_angle3", "gripper_left", "gripper_right"]
ACTION_NAMES = ["x", "y", "z", "roll", "pitch", "yaw", "gripper"]


def _stats(x: np.ndarray) -> dict[str, list]:
    x = np.asarray(x, dtype=np.float64)
    return {
        "min": x.min(0).tolist(),
        "max": x.max(0).tolist(),
        "mean": x.mean(0).tolist(),
        "std": x.std(0).tolist(),
        "count": [int(len(x))],
        "q01": np.quantile(x, 0.01, axis=0).tolist(),
        "q99": np.quantile(x, 0.99, axis=0).tolist(),
    }


def _image_stats(frames: np.ndarray) -> dict[str, list]:
    x = frames[:: max(1, len(frames) // 20)].astype(np.float64) / 255.0  # (n, H, W, 3)
    per = x.reshape(-1, 3)
    shape = lambda v: [[[float(c)]] for c in v]  # noqa: E731 - (3, 1, 1) as LeRobot keeps image stats
    return {
        "min": shape(per.min(0)),
        "max": shape(per.max(0)),
        "mean": shape(per.mean(0)),
        "std": shape(per.std(0)),
        "count": [int(len(frames))],
    }


def _merge_stats(parts: list[dict[str, list]]) -> dict[str, list]:
    """Dataset stats from per-episode stats (count-weighted mean and pooled variance)."""
    n = np.array([p["count"][0] for p in parts], dtype=np.float64)
    mean = np.array([p["mean"] for p in parts], dtype=np.float64)
    std = np.array([p["std"] for p in parts], dtype=np.float64)
    w = (n / n.sum()).reshape((-1,) + (1,) * (mean.ndim - 1))
    m = (w * mean).sum(0)
    var = (w * (std**2 + (mean - m) ** 2)).sum(0)
    out = {
        "min": np.min([p["min"] for p in parts], axis=0).tolist(),
        "max": np.max([p["max"] for p in parts], axis=0).tolist(),
        "mean": m.tolist(),
        "std": np.sqrt(var).tolist(),
        "count": [int(n.sum())],
    }
    if all("q01" in p for p in parts):  # an approximation across episodes (LeRobot's own is too)
        out["q01"] = np.min([p["q01"] for p in parts], axis=0).tolist()
        out["q99"] = np.max([p["q99"] for p in parts], axis=0).tolist()
    return out


def _tasks_table(tasks: list[str]) -> pa.Table:
    """tasks.parquet as pandas writes a DataFrame indexed by task (LeRobot reads it with pandas)."""
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object", "metadata": None}
        ],
        "columns": [  # (metadata: None on each, added below)
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    for c in pandas_meta["columns"]:
        c["metadata"] = None
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def _write_parquet(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


class _VideoFile:
    def __init__(self, path: Path, fps: int) -> None:
        import imageio.v2 as imageio

        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.frames = path, 0
        self._tmp = path.with_suffix(".tmp.mp4")  # ffmpeg picks the container by the extension
        self._writer = imageio.get_writer(
            self._tmp, format="FFMPEG", fps=fps, codec="libx264", quality=9, pixelformat="yuv420p", macro_block_size=1
        )

    def append(self, frames: np.ndarray) -> None:
        for f in frames:
            self._writer.append_data(np.ascontiguousarray(f))
        self.frames += len(frames)

    def close(self) -> None:
        self._writer.close()
        os.replace(self._tmp, self.path)


def write_lerobot(
    episodes: Iterable[DemoEpisode],
    root: str | Path,
    fps: int = 20,
    robot_type: str = "panda",
    episodes_per_file: int = 50,
    chunks_size: int = 1000,
) -> dict:
    """Write ``episodes`` as a LeRobot v3.0 dataset at ``root`` (which must not hold one yet).
    Returns the info dict."""
    root = Path(root)
    if (root / "meta" / "info.json").exists():
        raise ValueError(f"{root} already holds a LeRobot dataset (meta/info.json); choose another path")
    tasks: list[str] = []
    ep_rows: list[dict] = []
    ep_stats: dict[str, list] = {}
    rows: dict[str, list] = {
        k: []
        for k in ("observation.state", "action", "timestamp", "frame_index", "episode_index", "index", "task_index")
    }
    videos: dict[str, _VideoFile] = {}
    shapes: dict[str, tuple] = {}
    index = 0
    file_index, in_file, chunk = 0, 0, 0

    def flush_data():
        if not rows["index"]:
            return
        table = pa.table(
            {
                "observation.state": pa.array(rows["observation.state"], pa.list_(pa.float32(), 8)),
                "action": pa.array(rows["action"], pa.list_(pa.float32(), 7)),
                "timestamp": pa.array(rows["timestamp"], pa.float32()),
                "frame_index": pa.array(rows["frame_index"], pa.int64()),
                "episode_index": pa.array(rows["episode_index"], pa.int64()),
                "index": pa.array(rows["index"], pa.int64()),
                "task_index": pa.array(rows["task_index"], pa.int64()),
            }
        )
        _write_parquet(table, root / DATA_PATH.format(chunk_index=chunk, file_index=file_index))
        for v in rows.values():
            v.clear()
        for v in videos.values():
            v.close()
        videos.clear()

    n_eps = 0
    for ep_i, ep in enumerate(episodes):
        if in_file >= episodes_per_file:
            flush_data()
            file_index, in_file = file_index + 1, 0
        chunk = ep_i // chunks_size
        if ep.task not in tasks:
            tasks.append(ep.task)
        t_idx = tasks.index(ep.task)
        T = len(ep)
        row = {
            "episode_index": ep_i,
            "tasks": [ep.task],
            "length": T,
            "dataset_from_index": index,
            "dataset_to_index": index + T,
            "data/chunk_index": chunk,
            "data/file_index": file_index,
            "meta/episodes/chunk_index": 0,
            "meta/episodes/file_index": 0,
        }
        for cam, key in VIDEO_KEYS.items():
            if cam not in ep.images:
                continue
            frames = ep.images[cam]
            shapes[key] = frames.shape[1:]
            if key not in videos:
                path = root / VIDEO_PATH.format(video_key=key, chunk_index=chunk, file_index=file_index)
                videos[key] = _VideoFile(path, fps)
            v = videos[key]
            row[f"videos/{key}/chunk_index"] = chunk
            row[f"videos/{key}/file_index"] = file_index
            row[f"videos/{key}/from_timestamp"] = v.frames / fps
            row[f"videos/{key}/to_timestamp"] = (v.frames + T) / fps
            v.append(frames)
            st = _image_stats(frames)
            ep_stats.setdefault(key, []).append(st)
            for s, val in st.items():
                row[f"stats/{key}/{s}"] = np.asarray(val).reshape(-1).tolist()
        for name, values in (("observation.state", ep.state), ("action", ep.actions)):
            st = _stats(values)
            ep_stats.setdefault(name, []).append(st)
            for s, val in st.items():
                row[f"stats/{name}/{s}"] = val
        ep_rows.append(row)
        rows["observation.state"].extend(np.asarray(ep.state, np.float32).tolist())
        rows["action"].extend(np.asarray(ep.actions, np.float32).tolist())
        rows["timestamp"].extend((np.arange(T) / fps).tolist())
        rows["frame_index"].extend(range(T))
        rows["episode_index"].extend([ep_i] * T)
        rows["index"].extend(range(index, index + T))
        rows["task_index"].extend([t_idx] * T)
        index += T
        in_file += 1
        n_eps += 1
    if n_eps == 0:
        raise ValueError("no episodes to write")
    flush_data()

    features = {
        "observation.state": {"dtype": "float32", "shape": [8], "names": STATE_NAMES},
        "action": {"dtype": "float32", "shape": [7], "names": ACTION_NAMES},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    }
    for key, (h, w, c) in shapes.items():
        features[key] = {
            "dtype": "video",
            "shape": [h, w, c],
            "names": ["height", "width", "channels"],
            "info": {
                "video.height": h,
                "video.width": w,
                "video.codec": "h264",
                "video.pix_fmt": "yuv420p",
                "video.is_depth_map": False,
                "video.fps": fps,
                "video.channels": c,
                "has_audio": False,
            },
        }
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": n_eps,
        "total_frames": index,
        "total_tasks": len(tasks),
        "chunks_size": chunks_size,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200,
        "fps": fps,
        "splits": {"train": f"0:{n_eps}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if shapes else None,
        "features": features,
    }
    # the episode table: columns every row has (cameras absent in some episodes filled with None)
    cols = sorted({k for r in ep_rows for k in r}, key=lambda k: (k.startswith("stats/"), k))
    table = pa.table({k: [r.get(k) for r in ep_rows] for k in cols})
    _write_parquet(table, root / EPISODES_PATH.format(chunk_index=0, file_index=0))
    _write_parquet(_tasks_table(tasks), root / "meta" / "tasks.parquet")
    stats = {k: _merge_stats(v) for k, v in ep_stats.items()}
    _write_json(root / "meta" / "stats.json", stats)
    _write_json(root / "meta" / "info.json", info)  # last: its presence marks a complete dataset
    return info


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(obj, indent=4))
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- reading
def _find(features: dict, role: str) -> str | None:
    return next((k for k in ALIASES[role] if k in features), None)


def read_lerobot(root: str | Path, images: bool = True) -> Iterator[DemoEpisode]:
    """The episodes of a LeRobot v3.0 dataset at ``root``, in episode order."""
    root = Path(root)
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise FileNotFoundError(f"{root} is not a LeRobot dataset: no meta/info.json")
    info = json.loads(info_path.read_text())
    version = str(info.get("codebase_version", ""))
    if not version.startswith("v3"):
        raise ValueError(f"{root}: LeRobot dataset version {version!r}; this reader handles the v3 layout")
    feats, fps = info["features"], float(info["fps"])
    state_key, action_key = _find(feats, "state"), _find(feats, "action")
    if state_key is None or action_key is None:
        raise ValueError(f"{root}: no state/action features among {sorted(feats)}")
    cams = {cam: _find(feats, cam) for cam in ("agentview", "wrist")}
    cams = {c: k for c, k in cams.items() if k is not None and feats[k]["dtype"] == "video"}
    tasks_tab = pq.read_table(root / "meta" / "tasks.parquet").to_pydict()
    task_col = "task" if "task" in tasks_tab else "__index_level_0__"
    tasks = dict(zip(tasks_tab["task_index"], tasks_tab[task_col]))
    ep_files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    episodes = [r for f in ep_files for r in pq.read_table(f).to_pylist()]
    episodes.sort(key=lambda r: r["episode_index"])
    data_cache: dict[Path, dict] = {}
    for ep in episodes:
        dpath = root / info["data_path"].format(chunk_index=ep["data/chunk_index"], file_index=ep["data/file_index"])
        if dpath not in data_cache:
            data_cache.clear()  # episodes come file by file: keep one table
            data_cache[dpath] = pq.read_table(dpath).to_pydict()
        d = data_cache[dpath]
        sel = np.nonzero(np.asarray(d["episode_index"]) == ep["episode_index"])[0]
        sel = sel[np.argsort(np.asarray(d["frame_index"])[sel])]
        state = np.asarray([d[state_key][i] for i in sel], np.float32)
        actions = np.asarray([d[action_key][i] for i in sel], np.float64)
        task_idx = int(d["task_index"][sel[0]]) if "task_index" in d else 0
        ims = {}
        if images:
            for cam, key in cams.items():
                vpath = root / info["video_path"].format(
                    video_key=key,
                    chunk_index=ep[f"videos/{key}/chunk_index"],
                    file_index=ep[f"videos/{key}/file_index"],
                )
                start = int(round(ep[f"videos/{key}/from_timestamp"] * fps))
                ims[cam] = _decode(vpath, start, len(sel))
        task = tasks.get(task_idx) or (ep.get("tasks") or [""])[0]
        meta = {"root": str(root), "episode_index": int(ep["episode_index"]), "format": f"lerobot-{version}"}
        yield DemoEpisode(task=task, actions=actions, state=state, images=ims, meta=meta)


def _decode(path: Path, start: int, n: int) -> np.ndarray:
    import imageio.v2 as imageio

    reader = imageio.get_reader(path, format="FFMPEG")
    try:
        frames = [reader.get_data(start)]
        for _ in range(n - 1):
            frames.append(reader.get_next_data())
    finally:
        reader.close()
    return np.stack(frames).astype(np.uint8)
