"""Episode videos as a subscriber: streamed to disk, kept per the ``none | failures | all`` policy."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import imageio.v2 as imageio
import numpy as np

from envs.base import DrawsVideoFrame, Observation

from ..agents.base import DrawsLiveMap

from .runtime import Episode, EpisodeResult, Subscriber

VIDEO_MODES = ("none", "failures", "all")
LIVE_MAP_SHAPE = (512, 640, 3)  # a SpatialMemory map on its default frame: the blank panel before the first one


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


def letterbox(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``frame`` scaled (aspect kept) and padded white to exactly ``size = (h, w)``."""
    h, w = size
    if frame.shape[:2] != (h, w):
        k = min(h / frame.shape[0], w / frame.shape[1])
        if k < 1 or frame.shape[0] > h or frame.shape[1] > w:
            nh, nw = max(1, int(frame.shape[0] * k)), max(1, int(frame.shape[1] * k))
            frame = cv2.resize(frame, (nw, nh), interpolation=cv2.INTER_AREA)
        frame = np.pad(frame, ((0, h - frame.shape[0]), (0, w - frame.shape[1]), (0, 0)), constant_values=255)
    return np.ascontiguousarray(frame)


class VideoWriter(Subscriber):
    """Writes ``<out>/<suite>_taskNNN_trialNNN_{success,failure}.mp4``.

    Frames: the cameras beside the agent's live map when the agent draws one (:class:`DrawsLiveMap`,
    e.g. the memory agent's top-down map with its trajectory; a blank panel until the map exists),
    else ``env.video_frame(episode)`` when the env draws one (:class:`DrawsVideoFrame`, e.g. the ego
    view beside the ground-truth map), else the cameras side by side. The first frame fixes the
    video's size; any later frame of another size is letterboxed into it.
    Frames stream to a temporary file, so a long episode costs no memory; the file is renamed or
    deleted when the episode ends.

    ``trials``: film only the episodes whose trial is in it (e.g. the first two of each task); the
    others are not watched, so their steps render only what the agent reads (a filmed step renders
    every camera: a learned policy's LIBERO episode costs about three times as much filmed,
    docs/BENCHMARKS.md). None: every episode.
    """

    def __init__(self, out_dir: str | Path, mode: str = "failures", fps: int = 20, trials: range | None = None) -> None:
        if mode not in VIDEO_MODES:
            raise ValueError(f"unknown video mode {mode!r}; expected one of {VIDEO_MODES}")
        self.out_dir, self.mode, self.fps, self.trials = Path(out_dir), mode, int(fps), trials
        self._writer = None
        self._tmp: Path | None = None
        self.last_path: Path | None = None
        self._size: tuple[int, int] | None = None  # (h, w) of this episode's video, fixed by its first frame
        self._panel_shape: tuple[int, ...] = LIVE_MAP_SHAPE

    def _frame(self, episode: Episode) -> np.ndarray | None:
        if isinstance(episode.agent, DrawsLiveMap) and episode.observation.cameras:
            # the panel is there from the first frame (blank until the map exists), so the size holds
            panel = episode.agent.live_map()
            if panel is None:
                panel = np.full(self._panel_shape, 255, dtype=np.uint8)
            else:
                self._panel_shape = panel.shape
            frame = beside(tile_cameras(episode.observation), panel)
        elif isinstance(episode.env, DrawsVideoFrame):
            frame = episode.env.video_frame(episode)
        else:
            frame = tile_cameras(episode.observation)
        if frame is None:
            return None
        if self._size is None:
            h, w = frame.shape[:2]
            self._size = (h + h % 2, w + w % 2)  # x264 wants even sizes
        return letterbox(frame, self._size)

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

    def reads_frames(self, episode: Episode) -> bool:
        return self.mode != "none" and (self.trials is None or int(episode.key["trial"]) in self.trials)

    def on_episode_start(self, episode: Episode) -> None:
        self._writer, self._tmp, self.last_path, self._size = None, None, None, None
        if self.reads_frames(episode):
            self._write(episode)

    def on_step(self, episode, action, observation, reward, info) -> None:
        if self._writer is not None:
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
