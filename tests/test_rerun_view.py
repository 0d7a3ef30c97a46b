"""The rerun subscriber writes an episode's .rrd: camera frames, depth points, the agent's map objects
with their labels, the trajectory and the top-down map -- read back with rerun's own reader.

rerun is an optional extra (``pip install -e '.[rerun]'``): where it cannot be imported the test
skips and says why (rerun-sdk 0.23.1 needs a pyarrow that imports under numpy 1.x)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.serving import served


def _rerun():
    try:
        import rerun  # noqa: F401
        import rerun.dataframe as df
    except ImportError as exc:
        pytest.skip(f"rerun not importable here ({exc}); install the extra: pip install -e '.[rerun]'")
    return df


def _house_episode(agent, subscribers, max_steps=12):
    from envs.registry import make_env
    from vla.rollout.runtime import run_episode

    cfg = {
        "name": "house",
        "split": "test",
        "num_scenes": 1,
        "num_trials": 1,
        "max_steps": max_steps,
        "width": 96,
        "height": 96,
        "use_meshes": False,
        "render_map": False,
    }
    env = make_env(cfg, 0)
    try:
        key = {"env": "house", "suite": "house/test", "task_id": 0, "task": "house", "trial": 0}
        return run_episode(env, agent, key, subscribers, seed=7)
    finally:
        env.close()


def _column(rec, entity: str, component: str) -> list:
    table = rec.view(index="step", contents=entity).select().read_all()
    return table.column(f"{entity}:{component}").to_pylist(), table.column("step").to_pylist()


@pytest.mark.parametrize("where", ["local", "remote"])
def test_rerun_view_writes_the_episode(tmp_path, where):
    df = _rerun()
    from vla.agents import make_agent
    from vla.rollout.rerun_view import RerunView

    view = RerunView(tmp_path / "rerun", {"enabled": True, "map_every": 4})
    if where == "local":
        agent = make_agent({"name": "memory"})
        result = _house_episode(agent, [view])
        ids = {o.id for o in agent.live_memory().objects()}
    else:
        with served("memory") as srv:
            agent = make_agent({"name": "remote", "url": srv.url})
            result = _house_episode(agent, [view])
            ids = {o["id"] for o in agent.client.objects(session=agent.session).objects}
            agent.close()
    assert result.error is None and "subscriber_errors" not in result.extra, result
    path = tmp_path / "rerun" / "0_0.rrd"
    assert result.extra["rerun"] == str(path) and path.stat().st_size > 50_000
    rec = df.load_recording(path)
    entities = {c.entity_path for c in rec.schema().component_columns()}
    assert {
        "/world/cameras/ego",
        "/world/cameras/ego/image",
        "/world/cameras/ego/depth",
        "/world/points/ego",
        "/world/objects",
        "/world/trajectory",
        "/map/topdown",
    } <= entities
    labels, steps = _column(rec, "/world/objects", "Text")
    quats, _ = _column(rec, "/world/objects", "PoseRotationQuat")
    assert len(quats[-1]) == len(labels[-1])  # each box has its rotation
    assert steps[-1] == result.steps and set(labels[-1]) == ids  # the map's objects at the end, by id
    positions, steps = _column(rec, "/world/points/ego", "Position3D")
    assert steps == list(range(result.steps + 1)) and len(positions[0]) > 100
    assert np.isfinite(np.asarray(positions[-1], dtype=np.float64)).all()
    maps, steps = _column(rec, "/map/topdown", "ImageBuffer")
    assert steps == list(range(4, result.steps + 1, 4))  # none at step 0: nothing fused yet
    assert len(maps) == len(steps)
