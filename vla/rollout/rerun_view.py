"""``RerunView``: a rollout subscriber that streams an episode to rerun and saves it as ``.rrd``.

Per logged step (every ``every`` steps), on the ``step`` timeline:

    world/cameras/<name>           the camera's pose (Transform3D) and pinhole (OpenCV axes)
    world/cameras/<name>/image     its RGB frame          .../depth  its depth image (metres)
    world/points/<name>            the depth back-projected to a coloured point cloud (every ``points_stride`` px)
    world/objects                  the agent's map objects: gravity-aligned boxes labelled with their ids
    world/trajectory               the camera's path so far
    map/topdown                    the agent's top-down map (every ``map_every`` steps)

The objects and the map come from the agent's spatial memory: the local agent's live memory
(:class:`~vla.agents.base.HasLiveMemory`) or, for ``agent=remote``, the server's ``map.objects`` and
``map.topdown`` for its session. An agent without a memory gives camera frames, points and the
trajectory only. Poses are in the robot's frame (the memory's).

One recording per episode: ``save`` writes ``<out>/<task_id>_<trial>.rrd``; ``connect`` streams
to a running viewer (``rerun`` listening on gRPC; e.g. ``rerun+http://127.0.0.1:9876/proxy``).
Both at once log the episode to two streams. Needs the ``rerun`` extra (``pip install -e
.[rerun]``: rerun-sdk 0.23.1, the newest that accepts numpy 1.x).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vla_common.strict import from_dict

from .runtime import Episode, EpisodeResult, Subscriber


@dataclass(frozen=True)
class RerunOptions:
    """``rerun.*`` of vla-rollout: ``save`` one .rrd per episode under ``out/rerun``; ``connect`` a
    viewer's gRPC url to stream to; log every ``every`` steps, the top-down map (``map_level``)
    every ``map_every`` steps, every ``points_stride``-th depth pixel as a point."""

    enabled: bool = False
    save: bool = True
    connect: str | None = None
    every: int = 1
    map_every: int = 10
    map_level: str = "medium"
    points_stride: int = 4

    def __post_init__(self) -> None:
        if int(self.every) < 1 or int(self.map_every) < 1 or int(self.points_stride) < 1:
            raise ValueError("rerun.every, rerun.map_every and rerun.points_stride must be >= 1")
        if self.enabled and not self.save and not self.connect:
            raise ValueError("rerun is enabled but neither rerun.save nor rerun.connect is set")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "RerunOptions":
        return from_dict(cls, d, "rerun")


def import_rerun():
    """The rerun module, or an ImportError that says how to get it."""
    try:
        import rerun as rr
    except ImportError as exc:
        raise ImportError(
            f"rerun is not usable here ({exc}); install the extra: pip install -e '.[rerun]' "
            "(rerun-sdk 0.23.1 with a pyarrow that imports under numpy 1.x)"
        ) from exc
    return rr


def _yaw_quaternions(yaw_deg: list[float]) -> np.ndarray:
    """xyzw quaternions of rotations about +z (rerun 0.23's axis-angle path needs numpy 2)."""
    half = np.radians(np.asarray(yaw_deg, dtype=np.float64)) / 2
    q = np.zeros((len(half), 4), dtype=np.float32)
    q[:, 2], q[:, 3] = np.sin(half), np.cos(half)
    return q


class _MapSource:
    """The agent's objects and top-down map, from its live memory or from the server."""

    def __init__(self, agent: Any) -> None:
        from ..agents import HasLiveMemory
        from ..agents.remote import RemoteAgent

        self.agent = agent
        self.local = isinstance(agent, HasLiveMemory)
        self.remote = isinstance(agent, RemoteAgent) and agent.session is not None

    def objects(self) -> list[dict[str, Any]]:
        if self.local:
            from ..serve.mapquery import objects_table

            mem = self.agent.live_memory()
            return objects_table(mem)["objects"] if mem is not None and mem.n_frames else []
        if self.remote:
            return self.agent.client.objects(session=self.agent.session).objects
        return []

    def topdown(self, level: str) -> np.ndarray | None:
        if self.local:
            mem = self.agent.live_memory()
            return mem.topdown(level, trajectory=True, agent=True) if mem is not None and mem.n_frames else None
        if self.remote:
            from vla.wire.client import ServerError

            try:
                return self.agent.client.topdown(level, session=self.agent.session).image()
            except ServerError as exc:
                if exc.code == "not_found":  # nothing fused yet
                    return None
                raise
        return None


class RerunView(Subscriber):
    def __init__(self, out: str | Path | None, options: RerunOptions | dict | None = None) -> None:
        self.opts = options if isinstance(options, RerunOptions) else RerunOptions.from_dict(options)
        self.out = Path(out) if out is not None else None
        self.rr = import_rerun()
        self.streams: list[Any] = []
        self.path: Path | None = None
        self._traj: list[np.ndarray] = []
        self._source: _MapSource | None = None

    # ------------------------------------------------------------------ hooks
    def on_episode_start(self, episode: Episode) -> None:
        rr = self.rr
        key = episode.key
        rid = f"{key.get('suite', key.get('env'))}/{key['task_id']}/{key['trial']}"
        self.streams, self._traj = [], []
        if self.opts.save and self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            self.path = self.out / f"{key['task_id']}_{key['trial']}.rrd"
            s = rr.RecordingStream("vla-rollout", recording_id=rid)
            s.save(self.path)
            self.streams.append(s)
        if self.opts.connect:
            s = rr.RecordingStream("vla-rollout", recording_id=rid)
            s.connect_grpc(self.opts.connect)
            self.streams.append(s)
        self._source = _MapSource(episode.agent)
        self._log_step(episode, 0)

    def on_step(self, episode: Episode, action, observation, reward: float, info: dict) -> None:
        if episode.step % int(self.opts.every) == 0:
            self._log_step(episode, episode.step)

    def on_episode_end(self, episode: Episode, result: EpisodeResult) -> None:
        try:
            if self.streams and episode.observation is not None and episode.step % int(self.opts.every):
                self._log_step(episode, episode.step)
        finally:
            for s in self.streams:
                s.flush(blocking=True)
                s.disconnect()
            self.streams = []
            if self.path is not None:
                result.extra["rerun"] = str(self.path)

    # ------------------------------------------------------------------ logging
    def _log(self, path: str, entity: Any, static: bool = False) -> None:
        for s in self.streams:
            s.log(path, entity, static=static)

    def _log_step(self, episode: Episode, step: int) -> None:
        rr, obs = self.rr, episode.observation
        if obs is None or not self.streams:
            return
        for s in self.streams:
            s.set_time("step", sequence=int(step))
        for name, f in obs.cameras.items():
            T = f.T_world_cam
            base = f"world/cameras/{name}"
            self._log(base, rr.Transform3D(translation=T[:3, 3], mat3x3=T[:3, :3]))
            h, w = f.depth.shape
            self._log(base, rr.Pinhole(image_from_camera=f.K, resolution=[w, h], camera_xyz=rr.ViewCoordinates.RDF))
            self._log(f"{base}/image", rr.Image(f.rgb))
            self._log(f"{base}/depth", rr.DepthImage(np.nan_to_num(f.depth, nan=0.0, posinf=0.0), meter=1.0))
            pts, cols = _points(f, int(self.opts.points_stride))
            self._log(f"world/points/{name}", rr.Points3D(pts, colors=cols, radii=0.01))
        if obs.cameras:
            self._traj.append(next(iter(obs.cameras.values())).T_world_cam[:3, 3].copy())
            if len(self._traj) > 1:
                self._log("world/trajectory", rr.LineStrips3D([np.asarray(self._traj)], colors=[(220, 40, 40)]))
        objs = self._source.objects() if self._source is not None else []
        if objs:
            self._log(
                "world/objects",
                rr.Boxes3D(
                    centers=np.asarray([o["center"] for o in objs], dtype=np.float32),
                    sizes=np.asarray([o["size"] for o in objs], dtype=np.float32),
                    quaternions=_yaw_quaternions([o["yaw_deg"] for o in objs]),
                    labels=[o["id"] for o in objs],
                    show_labels=True,
                ),
            )
        if step % int(self.opts.map_every) == 0 and self._source is not None:
            img = self._source.topdown(self.opts.map_level)
            if img is not None:
                self._log("map/topdown", rr.Image(img))


def _points(frame, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """World points and colours of every ``stride``-th valid depth pixel."""
    d = frame.depth[::stride, ::stride]
    v, u = np.mgrid[0 : frame.depth.shape[0] : stride, 0 : frame.depth.shape[1] : stride]
    ok = np.isfinite(d) & (d > 0)
    z = d[ok].astype(np.float64)
    K = frame.K
    x = (u[ok] - K[0, 2]) / K[0, 0] * z
    y = (v[ok] - K[1, 2]) / K[1, 1] * z
    p_cam = np.stack([x, y, z], axis=1)
    T = frame.T_world_cam
    p_world = p_cam @ T[:3, :3].T + T[:3, 3]
    return p_world.astype(np.float32), frame.rgb[::stride, ::stride][ok]
