"""Episode videos as a subscriber: streamed to disk, kept per the ``none | failures | all`` policy."""

from __future__ import annotations

import os
from pathlib import Path

import imageio.v2 as imageio
import numpy as np

from envs.base import Observation

from .runtime import Episode, EpisodeResult, Subscriber

VIDEO_MODES = ("none", "failures", "all")


def episode_stem(key: dict) -> str:
    suite = str(key.get("suite", key.get("env", "env"))).replace("/", "-")
    return f"{suite}_task{int(key['task_id']):03d}_trial{int(key['trial']):03d}"


def tile_cameras(obs: Observation) -> np.ndarray | None:
    """All camera RGB images side by side (heights equalised by padding)."""
    images = [f.rgb for f in obs.cameras.values()]
    if not images:
        return None
    h = max(i.shape[0] for i in images)
    padded = [np.pad(i, ((0, h - i.shape[0]), (0, 0), (0, 0))) for i in images]
    return np.concatenate(padded, axis=1)


def beside(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``left`` scaled by an integer factor (nearest) towards ``right``'s height, then both side by side."""
    k = max(1, right.shape[0] // left.shape[0])
    left = np.repeat(np.repeat(left, k, axis=0), k, axis=1)
    h = max(left.shape[0], right.shape[0])
    pad = lambda im: np.pad(im, ((0, h - im.shape[0]), (0, 0), (0, 0)), constant_values=255)  # noqa: E731
    return np.concatenate([pad(left), pad(right)], axis=1)


class VideoWriter(Subscriber):
    """Writes ``<out>/<suite>_taskNNN_trialNNN_{success,failure}.mp4``.

    Frames: the cameras beside the agent's live map when the agent draws one (``agent.live_map()``,
    e.g. the memory agent's top-down map with its trajectory), else ``env.video_frame(episode)`` when
    the env defines it (e.g. the ego view beside the ground-truth map), else the cameras side by side.
    Frames stream to a temporary file, so a long episode costs no memory; the file is renamed or
    deleted when the episode ends.
    """

    def __init__(self, out_dir: str | Path, mode: str = "failures", fps: int = 20) -> None:
        if mode not in VIDEO_MODES:
            raise ValueError(f"unknown video mode {mode!r}; expected one of {VIDEO_MODES}")
        self.out_dir, self.mode, self.fps = Path(out_dir), mode, int(fps)
        self._writer = None
        self._tmp: Path | None = None
        self.last_path: Path | None = None

    def _frame(self, episode: Episode) -> np.ndarray | None:
        live = getattr(episode.agent, "live_map", None)
        panel = live() if live is not None else None
        if panel is not None and episode.observation.cameras:
            frame = beside(tile_cameras(episode.observation), panel)
        else:
            fn = getattr(episode.env, "video_frame", None)
            frame = fn(episode) if fn is not None else tile_cameras(episode.observation)
        if frame is None:
            return None
        h, w = frame.shape[:2]
        return np.ascontiguousarray(np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0))))  # x264 wants even sizes

    def _write(self, episode: Episode) -> None:
        frame = self._frame(episode)
        if frame is None:
            return
        if self._writer is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._tmp = self.out_dir / f".{episode_stem(episode.key)}.{os.getpid()}.tmp.mp4"
            self._writer = imageio.get_writer(
                self._tmp, fps=self.fps, codec="libx264", macro_block_size=1, quality=7, pixelformat="yuv420p"
            )
        self._writer.append_data(frame)

    def on_episode_start(self, episode: Episode) -> None:
        self._writer, self._tmp, self.last_path = None, None, None
        if self.mode != "none":
            self._write(episode)

    def on_step(self, episode, action, observation, reward, info) -> None:
        if self.mode != "none":
            self._write(episode)

    def on_episode_end(self, episode: Episode, result: EpisodeResult) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        keep = self.mode == "all" or (self.mode == "failures" and not result.success)
        if keep:
            final = self.out_dir / f"{episode_stem(episode.key)}_{'success' if result.success else 'failure'}.mp4"
            os.replace(self._tmp, final)
            self.last_path = final
            result.extra["video"] = final.name
        else:
            self._tmp.unlink(missing_ok=True)
