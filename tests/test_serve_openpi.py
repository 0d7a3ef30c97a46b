"""openpi's websocket protocol in vla-serve, driven by openpi's own client (the ``openpi-client``
package): metadata on connect, bare observations in openpi's msgpack-numpy encoding, ``actions``
chunks with ``server_timing``, errors as openpi's server reports them, its action-chunk broker,
its API key, and the map still queryable over our protocol on ``/vla``."""

from __future__ import annotations

import numpy as np
import pytest
import websockets
from websockets.sync.client import connect

from tests.serving import LinearModel, served, toy_spec, tour_observations
from vla.serve import ModelSessions, PolicyClient

openpi_client = pytest.importorskip("openpi_client")
from openpi_client.action_chunk_broker import ActionChunkBroker  # noqa: E402
from openpi_client.websocket_client_policy import WebsocketClientPolicy  # noqa: E402

KEYS = {
    "observation/image": "cameras/ego/rgb",
    "observation/depth": "cameras/ego/depth",
    "observation/intrinsics": "cameras/ego/K",
    "observation/pose": "cameras/ego/T_world_cam",
    "observation/instance": "cameras/ego/instance",
    "observation/label_ids": "cameras/ego/label_ids",
    "observation/label_names": "cameras/ego/label_names",
    "observation/state": "state",
    "prompt": "prompt",
}
IMAGE_ONLY = {"observation/image": "cameras/ego/rgb", "observation/state": "state", "prompt": "prompt"}


def openpi_obs(o: dict, keys: dict = KEYS) -> dict:
    """Our observation dict as an openpi client sends it (openpi's keys, no step)."""
    return {theirs: o[ours] for theirs, ours in keys.items()}


class ChunkModel(LinearModel):
    """A chunk of 3: the linear action, then it scaled by 0.5 and 0.25 (so the order shows)."""

    name = "chunk-test-model"

    def infer_batch(self, observations):
        return [np.stack([a, 0.5 * a, 0.25 * a]) for a in super().infer_batch(observations)]


def test_openpi_client_with_its_default_host_reaches_a_loopback_server():
    """openpi's clients (its LIBERO example's ``--args.host``) default to 0.0.0.0, which they send as the
    ``Host``: a tokenless server on 127.0.0.1 serves them (no Origin: a program, not a page)."""
    obs, _ = tour_observations()
    with served(ModelSessions(LinearModel()), expected_spec=toy_spec(), protocol="openpi", openpi_keys=KEYS) as srv:
        client = WebsocketClientPolicy("0.0.0.0", srv.port)
        r = client.infer(openpi_obs(obs[0]))
        np.testing.assert_allclose(r["actions"][0], LinearModel.expected(obs[0]["state"]))


def test_openpi_client_infers_against_vla_serve_and_the_map_stays_queryable():
    obs, _ = tour_observations()
    policy = ModelSessions(LinearModel(), memory={"memory": "apartment", "inputs": ["objects"]})
    with served(policy, expected_spec=toy_spec(), protocol="openpi", openpi_keys=KEYS) as srv:
        client = WebsocketClientPolicy("127.0.0.1", srv.port)
        meta = client.get_server_metadata()
        assert meta["protocol"] == "openpi" and meta["agent"] == "linear-test-model" and meta["openpi_keys"] == KEYS
        for o in obs[:6]:
            r = client.infer(openpi_obs(o))
            assert set(r) == {"actions", "server_timing"} and r["actions"].shape == (1, 2)
            np.testing.assert_allclose(r["actions"][0], LinearModel.expected(o["state"]))
            assert r["server_timing"]["infer_ms"] >= 0
        assert "prev_total_ms" in r["server_timing"]
        # the session's map, fused from what openpi's client sent, over our protocol on /vla
        with PolicyClient(srv.url + "/vla") as c:
            (s,) = c.sessions()
            assert s["steps"] == 5 and s["instruction"] == "look around"
            assert c.objects(session=s["session"]).frames == 6
            assert c.query(question="where is the sofa?", session=s["session"]).category == "sofa"
        # a new prompt starts a new episode of the same session (openpi's protocol has no reset)
        client.infer({**openpi_obs(obs[0]), "prompt": "go to the bed"})
        with PolicyClient(srv.url + "/vla") as c:
            (s,) = c.sessions()
            assert s["episode"] == 2 and s["instruction"] == "go to the bed"
            assert c.objects(session=s["session"]).frames == 1
        # our client on the openpi path is told where our protocol is
        with pytest.raises(ConnectionError, match="/vla"):
            PolicyClient(srv.url, reconnect=False).connect()


def test_openpi_action_chunk_broker_plays_served_chunks_in_order():
    obs, _ = tour_observations()
    # openpi's protocol on /openpi of a server whose default protocol is ours
    with served(ModelSessions(ChunkModel()), expected_spec=toy_spec(), openpi_keys=IMAGE_ONLY) as srv:
        broker = ActionChunkBroker(WebsocketClientPolicy(f"ws://127.0.0.1:{srv.port}/openpi"), action_horizon=3)
        played = [broker.infer(openpi_obs(o, IMAGE_ONLY))["actions"] for o in obs[:6]]
        for k in (0, 3):
            a = LinearModel.expected(obs[k]["state"])
            np.testing.assert_allclose(np.stack(played[k : k + 3]), [a, 0.5 * a, 0.25 * a])
        assert srv.health()["inferred"] == 2  # one server call per chunk of 3


def test_openpi_errors_are_reported_as_openpi_reports_them():
    obs, _ = tour_observations()
    with served(ModelSessions(LinearModel()), expected_spec=toy_spec(), protocol="openpi") as srv:
        client = WebsocketClientPolicy("127.0.0.1", srv.port, api_key=None)
        with pytest.raises(RuntimeError) as e:  # no key map for this env family, and none given
            client.infer(openpi_obs(obs[0], IMAGE_ONLY))
        assert "no openpi key map" in str(e.value)
    policy = ModelSessions(LinearModel())
    with served(policy, expected_spec=toy_spec(), protocol="openpi", openpi_keys=IMAGE_ONLY) as srv:
        cases = [
            ({**openpi_obs(obs[0], IMAGE_ONLY), "observation/state": np.zeros(5)}, "state"),
            ({**openpi_obs(obs[0], IMAGE_ONLY), "observation/extra": np.zeros(1)}, "observation/extra"),
            ({**openpi_obs(obs[0], IMAGE_ONLY), "observation/state": np.array([np.nan, 0, 0])}, "NaN"),
            ({**openpi_obs(obs[0], IMAGE_ONLY), "prompt": 3}, "prompt"),
        ]
        for bad, names in cases:
            client = WebsocketClientPolicy("127.0.0.1", srv.port)
            with pytest.raises(RuntimeError) as e:
                client.infer(bad)
            assert "bad_request" in str(e.value) and names in str(e.value), str(e.value)
            with pytest.raises(websockets.ConnectionClosed) as closed:  # and the server closed it, as openpi's does
                client.infer(openpi_obs(obs[0], IMAGE_ONLY))
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
        # everyone else is served on
        r = WebsocketClientPolicy("127.0.0.1", srv.port).infer(openpi_obs(obs[1], IMAGE_ONLY))
        np.testing.assert_allclose(r["actions"][0], LinearModel.expected(obs[1]["state"]))


def test_openpi_clients_pass_the_same_token_and_origin_checks():
    obs, _ = tour_observations()
    policy = ModelSessions(LinearModel())
    with served(policy, expected_spec=toy_spec(), protocol="openpi", openpi_keys=IMAGE_ONLY, token="k3y") as srv:
        with pytest.raises(websockets.InvalidStatus, match="401"):
            WebsocketClientPolicy("127.0.0.1", srv.port)
        r = WebsocketClientPolicy("127.0.0.1", srv.port, api_key="k3y").infer(openpi_obs(obs[0], IMAGE_ONLY))
        assert r["actions"].shape == (1, 2)
        with pytest.raises(websockets.InvalidStatus, match="403"):
            connect(f"ws://127.0.0.1:{srv.port}/?token=k3y", origin="http://evil.example")


def test_agent_openpi_plays_served_chunks_and_reports_server_errors():
    from envs.observation import Observation
    from vla.agents import make_agent

    obs, _ = tour_observations()
    policy = ModelSessions(ChunkModel())
    with served(policy, expected_spec=toy_spec(), protocol="openpi", openpi_keys=IMAGE_ONLY) as srv:
        url = f"ws://127.0.0.1:{srv.port}"
        agent = make_agent({"name": "openpi", "url": url, "keys": IMAGE_ONLY, "replan_steps": 2})
        for episode in range(2):
            agent.reset("look around", toy_spec())
            played = [agent.act(Observation.from_dict(o)) for o in obs[:4]]
            for k in (0, 2):  # a chunk of 3, re-planned after 2
                a = LinearModel.expected(obs[k]["state"])
                np.testing.assert_allclose(played[k : k + 2], [a, 0.5 * a])
        assert srv.health()["inferred"] == 4 and agent.metadata["protocol"] == "openpi"
        with PolicyClient(srv.url + "/vla") as c:  # one session per episode, the first ended with its connection
            assert sorted(s["state"] for s in c.sessions()) == ["active", "ended"]
        agent.reset("look around", toy_spec())
        bad = Observation.from_dict({**obs[0], "state": np.zeros(3, np.float32)})
        bad.state = np.zeros(5)
        with pytest.raises(RuntimeError, match="bad_request.*state"):
            agent.act(bad)
        agent.close()


def test_the_openpi_libero_eval_script_says_what_is_wrong_before_it_builds_an_env(tmp_path, capsys):
    """scripts/openpi_libero_eval.py (run on LIBERO in test_serve_openpi_libero): no server at the
    address, a bad task or suite -- each a one-line reason and exit 2, no run started in --out."""
    import socket

    from scripts.openpi_libero_eval import main

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "eval"
    assert main(["--port", str(port), "--task", "0", "--trials", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach an openpi-protocol server at ws://127.0.0.1:{port}" in err and "vla-serve" in err, err
    assert not (out / "config.json").exists()
    assert main(["--task", "first", "--out", str(out)]) == 2
    assert "--task must be task ids" in capsys.readouterr().err
    assert main(["--suite", "libero_nope", "--task", "0", "--out", str(out)]) == 2
    assert "unknown LIBERO suite 'libero_nope'" in capsys.readouterr().err
