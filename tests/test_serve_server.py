"""The policy server on loopback: sessions, batching, live map queries against known truth, reconnects,
vanishing clients, tokens, limits, JSON clients and the HTTP routes."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import cv2
import numpy as np
import pytest
import websockets
from websockets.sync.client import connect

from spatial_memory import SpatialMemory
from spatial_memory.synthetic import apartment_scene
from spatial_memory.topdown import TopDownFrame
from tests.serving import LinearModel, angle_diff, served, toy_spec, tour_observations, truth_bearing
from vla.serve import ConnectionRejected, ModelSessions, PolicyClient, ServeConfig, ServerError, make_batch_policy
from vla.wire.codec import pack, unpack

# the toy env is not a mobile base, so "auto" would pick the tabletop preset (depth to 3 m)
MEMORY = {"name": "memory", "memory": "apartment"}


def _run_tour(client: PolicyClient, obs: list[dict]) -> None:
    client.reset("look around", toy_spec(), seed=[7, 0, 0])
    for o in obs:
        r = client.infer(o)
        assert r.action.shape == (2,)


def test_metadata_health_and_infer_with_a_random_agent():
    with served("random") as srv, PolicyClient(srv.url) as c:
        assert c.metadata["protocol"] == 1 and c.metadata["agent"] == "random"
        assert {"reset", "infer", "map.query", "map.topdown", "map.snapshot", "health"} <= set(c.metadata["methods"])
        sid = c.reset("look around", toy_spec())
        obs, _ = tour_observations()
        r = c.infer(obs[0])
        assert r.session == sid and r.step == 0 and r.action.shape == (2,)
        assert np.all(np.abs(r.action) <= 1.0)
        assert {"queue_ms", "infer_ms", "batch_size", "server_ms"} <= set(r.server_timing)
        h = c.health()
        assert h["ok"] and h["inferred"] == 1 and h["sessions"]["active"] == 1
        with pytest.raises(ServerError, match="no spatial memory"):
            c.query(target="sofa")


def test_map_queries_match_the_scene_truth():
    """Direction and distance from the served memory agree with the synthetic scene's truth, and
    the map point, agent point and heading agree with the egocentric answer."""
    scene = apartment_scene()
    obs, poses = tour_observations()
    with served(MEMORY) as srv, PolicyClient(srv.url) as c:
        _run_tour(c, obs)
        T = poses[-1]
        for cat in ("sofa", "bed", "table", "wardrobe"):
            a = c.query(target=cat)
            want_dir, want_dist = truth_bearing(T, scene.object(cat).center)
            assert a.category == cat
            assert angle_diff(a.direction_deg, want_dir) < 8.0, (cat, a.direction_deg, want_dir)
            assert abs(a.distance_m - want_dist) < 0.4, (cat, a.distance_m, want_dist)
            # the map: from the agent's point to the object's point, relative to the agent's heading
            f = a.raw["frame"]
            sx, sy = f["width"] / 999.0, f["height"] / 999.0
            dx = (a.point[0] - a.agent["point"][0]) * sx
            dy = (a.point[1] - a.agent["point"][1]) * sy
            if np.hypot(dx, dy) > 15:  # pixels: far enough for the grid's rounding not to matter
                on_map = np.degrees(np.arctan2(-dy, dx)) - (a.agent["heading_deg"] + 90.0)
                assert angle_diff(on_map, a.direction_deg) < 4.0, (cat, on_map, a.direction_deg)
        by_question = c.query(question="Where is the bed now, relative to the robot?")
        assert by_question.category == "bed" and by_question.id == c.query(target="bed").id
        assert "deg" in by_question.text and " m away" in by_question.text
        sub = c.query(target="sofa", what=["direction", "distance"]).raw
        assert "point" not in sub and "agent" not in sub and "direction_deg" in sub
        with pytest.raises(ServerError, match="no object in memory matches") as e:
            c.query(question="where is the piano?")
        assert e.value.code == "not_found" and "sofa" in e.value.message
        table = c.objects()
        assert table.frames == len(obs) and table.step == len(obs) - 1
        dists = [o["distance_m"] for o in table.objects]
        assert dists == sorted(dists) and {"sofa", "bed"} <= {o["category"] for o in table.objects}


def test_topdown_png_and_snapshot_agree(tmp_path):
    obs, _ = tour_observations()
    with served(MEMORY) as srv, PolicyClient(srv.url) as c:
        _run_tour(c, obs)
        td = c.topdown("medium", width=320, height=256)
        img = td.image()
        assert img.shape == (256, 320, 3)
        c.snapshot(tmp_path / "m.npz")
        mem = SpatialMemory.load(tmp_path / "m.npz")
        assert mem.n_frames == len(obs)
        assert {o.id for o in mem.objects()} == {o["id"] for o in c.objects().objects}
        f = td.frame
        frame = TopDownFrame(f["xmin"], f["ymin"], f["xmax"], f["ymax"], f["width"], f["height"])
        again = mem.topdown("medium", frame, trajectory=True, agent=True)
        assert np.array_equal(again, img)


def test_sessions_are_separate_memories():
    obs, poses = tour_observations()
    with served(MEMORY) as srv, PolicyClient(srv.url) as a, PolicyClient(srv.url) as b:
        _run_tour(a, obs[:14])
        _run_tour(b, obs[14:])
        assert a.session != b.session
        ta, tb = a.objects(session=a.session), b.objects(session=b.session)
        assert ta.frames == 14 and tb.frames == len(obs) - 14
        assert np.allclose(ta.agent["position"], poses[13][:3, 3], atol=1e-3)
        assert np.allclose(tb.agent["position"], poses[-1][:3, 3], atol=1e-3)
        listed = {s["session"]: s for s in a.sessions()}
        assert set(listed) == {a.session, b.session} and all(s["state"] == "active" for s in listed.values())
        # with no session named, queries go to the most recently active one
        assert a.objects().session == b.session


@pytest.mark.parametrize("batching", [True, False])
def test_infer_calls_of_many_clients_are_batched(batching):
    model = LinearModel(delay_s=0.01)
    rng = np.random.default_rng(0)
    errors: list[str] = []
    with served(ModelSessions(model), batching=batching, max_batch=8, max_wait_ms=5) as srv:

        def worker(k: int) -> None:
            obs, _ = tour_observations()
            with PolicyClient(srv.url) as c:
                c.reset("look around", toy_spec())
                for i in range(12):
                    o = dict(obs[i])
                    o["state"] = np.array([k, i, 0.5]) + rng.normal(size=3)
                    r = c.infer(o)
                    if not np.allclose(r.action, LinearModel.expected(o["state"])):
                        errors.append(f"client {k} step {i}: {r.action} != expected")

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        h = PolicyClient(srv.url).connect().health()
    assert not errors, errors[:3]
    assert sum(model.calls) == 48 and h["inferred"] == 48
    if batching:
        assert max(model.calls) > 1 and h["max_batch_seen"] == max(model.calls)
    else:
        assert set(model.calls) == {1}


def test_batched_model_through_the_registry_and_refused_agents():
    policy = make_batch_policy({"name": "tests.serving:LinearModel"})
    assert isinstance(policy, ModelSessions) and policy.metadata()["model"] == "linear-3x2"
    with pytest.raises(ValueError, match="privileged.*scene truth"):
        make_batch_policy({"name": "scripted"})
    with pytest.raises(ValueError, match="client of another server"):
        make_batch_policy({"name": "remote"})


def test_reconnect_resumes_the_session_and_a_retried_infer_is_not_stepped_twice():
    obs, _ = tour_observations()
    with served(MEMORY) as srv, PolicyClient(srv.url) as c:
        sid = c.reset("look around", toy_spec())
        for o in obs[:5]:
            c.infer(o)
        c._ws.close()  # the connection drops under the client
        r = c.infer(obs[5])
        assert r.session == sid and c.session == sid
        assert c.objects().frames == 6
        # the same request again (a reply lost in transit): answered from the cache, not stepped
        again = c.call("infer", {"observation": obs[5], "seq": 5})
        assert np.array_equal(again["action"], r.action) and c.objects().frames == 6
        with pytest.raises(ServerError, match="older than"):
            c.call("infer", {"observation": obs[5], "seq": 2})


def test_a_client_vanishing_mid_episode_leaves_everyone_else_served():
    obs, _ = tour_observations()
    with served(MEMORY, session_timeout_s=0.3) as srv:
        ws = connect(srv.url, compression=None, legacy=True)
        unpack(ws.recv(timeout=5))  # metadata
        ws.send(pack({"id": 1, "method": "reset", "params": {"instruction": "x", "spec": toy_spec().to_dict()}}))
        gone = unpack(ws.recv(timeout=5))["result"]["session"]
        for i in range(3):
            ws.send(pack({"id": 2 + i, "method": "infer", "params": {"observation": obs[i]}}))
            unpack(ws.recv(timeout=10))
        ws.send(pack({"id": 9, "method": "infer", "params": {"observation": obs[3]}}))
        ws.socket.close()  # vanish without a close handshake, an infer in flight
        with PolicyClient(srv.url) as other:
            _run_tour(other, obs[:4])
            deadline = time.time() + 10
            while time.time() < deadline:
                states = {s["session"]: s["state"] for s in other.sessions()}
                if states.get(gone) == "ended":
                    break
                time.sleep(0.1)
            assert states[gone] == "ended" and states[other.session] == "active"
            final = other.objects(session=gone)  # the ended session's map is still there
            assert final.frames in (3, 4)
            assert other.infer(obs[4]).action.shape == (2,)


def test_token_binding_and_http_auth():
    assert ServeConfig().host == "127.0.0.1"
    with served("random", token="s3cret") as srv:
        assert srv.cfg.host == "127.0.0.1"
        with pytest.raises(ConnectionRejected, match="401"):
            PolicyClient(srv.url).connect()
        with pytest.raises(ConnectionRejected, match="401"):
            PolicyClient(srv.url, token="wrong").connect()
        with PolicyClient(srv.url, token="s3cret") as c:
            assert c.health()["ok"]
        base = f"http://127.0.0.1:{srv.port}"
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/healthz", timeout=5)
        assert e.value.code == 401
        e.value.close()
        with urllib.request.urlopen(base + "/healthz?token=s3cret", timeout=5) as r:
            assert json.loads(r.read())["ok"] is True


def test_oversized_messages_close_the_connection_cleanly():
    with served("random", max_message_mb=0.01) as srv:
        ws = connect(srv.url, compression=None, max_size=None, legacy=True)
        unpack(ws.recv(timeout=5))
        ws.send(pack({"id": 1, "method": "health", "params": {"pad": b"x" * 20000}}))
        with pytest.raises(websockets.ConnectionClosed) as e:
            ws.recv(timeout=5)
        assert e.value.rcvd is not None and e.value.rcvd.code == 1009
        with PolicyClient(srv.url) as c:
            assert c.health()["ok"]


def test_json_clients_and_http_routes():
    obs, _ = tour_observations()
    with served(MEMORY) as srv, PolicyClient(srv.url) as c:
        _run_tour(c, obs)
        ws = connect(srv.url + "/?format=json", compression=None, legacy=True)
        hello = json.loads(ws.recv(timeout=5))
        assert hello["event"] == "metadata" and hello["result"]["agent"] == "memory"
        ws.send(json.dumps({"id": "q1", "method": "map.query", "params": {"question": "where is the sofa?"}}))
        r = json.loads(ws.recv(timeout=10))
        assert r["id"] == "q1" and r["ok"] and r["result"]["category"] == "sofa"
        ws.send(json.dumps({"id": 2, "method": "infer", "params": {"observation": {}}}))
        r = json.loads(ws.recv(timeout=5))
        assert not r["ok"] and "msgpack" in r["error"]["message"]
        ws.close()
        base = f"http://127.0.0.1:{srv.port}"
        with urllib.request.urlopen(base + "/", timeout=5) as r:
            assert r.headers["Content-Type"].startswith("text/html") and b"<title>vla-serve" in r.read()
        with urllib.request.urlopen(base + "/map.png?level=hard&width=200&height=100", timeout=10) as r:
            img = cv2.imdecode(np.frombuffer(r.read(), np.uint8), cv2.IMREAD_COLOR)
        assert img.shape == (100, 200, 3)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/nope", timeout=5)
        assert e.value.code == 404
        e.value.close()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/map.png?level=nope", timeout=5)
        assert e.value.code == 400
        e.value.close()


def test_expected_spec_and_bad_observations_name_what_is_wrong():
    obs, _ = tour_observations()
    spec = toy_spec()
    with served(MEMORY, expected_spec=spec) as srv, PolicyClient(srv.url) as c:
        assert c.metadata["env_spec"] == spec.to_dict()
        other = spec.to_dict()
        other["family"] = "libero"
        with pytest.raises(ServerError, match="expects the synthetic env"):
            c.reset("x", other)
        c.reset("look around", spec)
        with pytest.raises(ServerError, match="state"):
            c.infer({k: v for k, v in obs[0].items() if k != "state"})
        bad = dict(obs[0], **{"cameras/ego/rgb": obs[0]["cameras/ego/rgb"].astype(np.float32)})
        with pytest.raises(ServerError, match="cameras/ego/rgb"):
            c.infer(bad)
        with pytest.raises(ServerError, match="'state' contains NaN"):
            c.infer(dict(obs[0], state=np.array([np.nan, 0.0, 0.0])))
        with pytest.raises(ServerError, match="T_world_cam"):
            c.infer(dict(obs[0], **{"cameras/ego/T_world_cam": np.full((4, 4), np.inf)}))
        assert c.infer(obs[0]).action.shape == (2,)  # and the session goes on
        assert c.objects().frames == 1


def test_policy_failures_are_the_policys_errors_and_the_session_goes_on():
    obs, _ = tour_observations()
    with served({"name": "tests.serving:PickyAgent"}) as srv, PolicyClient(srv.url) as a, PolicyClient(srv.url) as b:
        with pytest.raises(ServerError) as e:
            a.reset("refuse", toy_spec())
        assert e.value.code == "policy_error" and "no such task" in e.value.message
        with pytest.raises(ServerError) as e:
            a.infer(obs[0])
        assert e.value.code == "no_session" and "call reset first" in e.value.message
        b.reset("look around", toy_spec())
        a.reset("look around", toy_spec())
        for i in range(4):
            if i == 2:
                with pytest.raises(ServerError) as e:
                    a.infer(obs[i])
                assert e.value.code == "policy_error" and "NaN" in e.value.message
            else:
                assert np.array_equal(a.infer(obs[i]).action, np.zeros(2))
            assert b.infer(obs[min(i, 1)]).action.shape == (2,)
        assert a.health()["errors"] >= 3


def test_paced_queries_still_answer():
    obs, _ = tour_observations()
    with served(MEMORY, query_rate=50) as srv, PolicyClient(srv.url) as c, PolicyClient(srv.url) as q:
        _run_tour(c, obs[:10])
        answers = {q.query(target="sofa").id for _ in range(5)}
        assert answers == {c.query(target="sofa").id} and srv.health()["queries"] == 6
