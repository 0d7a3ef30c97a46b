"""The server as a hostile user meets it: web pages of other origins, DNS rebinding, a second client
taking over a session, strings that are not Unicode, malformed specs, messages of a million tiny
values, idle and surplus connections, too many sessions, nonsensical map frames, and a query cache
that must not keep memories alive. Each test fails on the server before these checks existed."""

from __future__ import annotations

import base64
import gc
import http.client
import json
import os

import msgpack
import numpy as np
import pytest
import websockets
from websockets.sync.client import connect

from spatial_memory import SpatialMemory
from tests.serving import serve_cli, served, toy_spec, tour_observations
from vla.serve import ConnectionRejected, PolicyClient, ServeConfig, ServerError
from vla.serve.cli import serve_main
from vla.wire.codec import unpack

MEMORY = {"name": "memory", "memory": "apartment"}
# what Chromium sends when a page opens a websocket (besides Origin and Host)
BROWSER = {
    "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
    "Pragma": "no-cache",
    "Cache-Control": "no-cache",
    "Accept-Language": "en-US,en;q=0.9",
}


def handshake(port: int, host: str, origin: str | None, path: str = "/?format=json") -> int:
    """The HTTP status a browser-like websocket handshake gets (101: accepted)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    headers = {
        "Host": host,
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        **BROWSER,
    }
    if origin is not None:
        headers["Origin"] = origin
    for k, v in headers.items():
        c.putheader(k, v)
    c.endheaders()
    status = c.getresponse().status
    c.close()
    return status


def http_get(port: int, path: str, host: str, origin: str | None = None) -> int:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.putrequest("GET", path, skip_host=True)
    c.putheader("Host", host)
    if origin is not None:
        c.putheader("Origin", origin)
    c.endheaders()
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def test_pages_of_other_origins_and_rebound_names_are_refused():
    with served("random") as srv:
        port = srv.port
        here = f"127.0.0.1:{port}"
        # the live page opened on this machine, by address or by name, and programs (no Origin)
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", None):
            assert handshake(port, here, origin) == 101, origin
        # any other page: another site, another port of this machine, a file or sandbox
        for origin in ("http://evil.example", f"http://evil.example:{port}", "http://127.0.0.1:8000", "null"):
            assert handshake(port, here, origin) == 403, origin
        # a real client library sending a browser's Origin
        with pytest.raises(websockets.InvalidStatus) as e:
            connect(f"ws://{here}/?format=json", origin="https://evil.example", additional_headers=BROWSER)
        assert e.value.response.status_code == 403 and b"origin" in e.value.response.body
        # DNS rebinding: a page of evil.example whose name now points here is same-origin with itself
        assert handshake(port, f"evil.example:{port}", f"http://evil.example:{port}") == 403
        assert http_get(port, "/healthz", f"evil.example:{port}") == 403  # a same-origin GET has no Origin
        # plain HTTP: cross-origin requests are refused, the page's own are served
        assert http_get(port, "/healthz", here, origin="http://evil.example") == 403
        assert http_get(port, "/healthz", here, origin=f"http://127.0.0.1:{port}") == 200
        assert http_get(port, "/", f"localhost:{port}") == 200
    with served("random", origins=["http://dash.example:3000"]) as srv:
        assert handshake(srv.port, f"127.0.0.1:{srv.port}", "http://dash.example:3000") == 101
        assert handshake(srv.port, f"127.0.0.1:{srv.port}", "http://dash.example:3001") == 403
    with served("random", token="t0k") as srv:
        # with a token, the page may be opened by any name of the server (it must know the token)
        name = f"robot-pc:{srv.port}"
        assert handshake(srv.port, name, f"http://{name}", path="/?format=json&token=t0k") == 101
        assert handshake(srv.port, name, "http://evil.example", path="/?format=json&token=t0k") == 403


def test_a_program_may_name_the_unspecified_address_a_page_may_not():
    """``Host: 0.0.0.0`` (openpi's clients connect to 0.0.0.0 by default; the OS routes it here): a
    websocket without ``Origin`` is a program (browsers send ``Origin`` on every websocket) and is served;
    a page opened at 0.0.0.0 and a plain GET naming 0.0.0.0 -- the path by which browsers let remote
    pages reach local services -- are refused, with what to do instead."""
    with served("random") as srv:
        port = srv.port
        for name in (f"0.0.0.0:{port}", f"[::]:{port}"):
            assert handshake(port, name, None) == 101, name
            assert handshake(port, name, f"http://{name}") == 403, name
            assert http_get(port, "/healthz", name) == 403, name
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.putrequest("GET", "/", skip_host=True)
        c.putheader("Host", f"0.0.0.0:{port}")
        c.endheaders()
        r = c.getresponse()
        assert r.status == 403 and f"127.0.0.1:{port}" in r.read().decode()  # where to open the page instead
        c.close()


def test_listening_beyond_loopback_needs_a_token_or_insecure(capsys):
    with pytest.raises(ValueError, match="without a token"):
        ServeConfig(host="0.0.0.0")
    assert ServeConfig(host="0.0.0.0", token="s3cret").token == "s3cret"
    assert ServeConfig(host="0.0.0.0", insecure=True).insecure
    assert ServeConfig(host="localhost").host == "localhost"
    assert serve_main(["agent=random", "host=0.0.0.0", "port=0"]) == 2
    err = capsys.readouterr().err
    assert "without a token" in err and "insecure=true" in err


def test_a_second_client_cannot_take_over_a_session():
    obs, _ = tour_observations()
    with served(MEMORY) as srv, PolicyClient(srv.url) as owner, PolicyClient(srv.url) as other:
        sid = owner.reset("look around", toy_spec())
        owner.infer(obs[0])
        listed = other.sessions()
        assert [s["session"] for s in listed] == [sid]  # the id is a public handle for its map ...
        assert "secret" not in json.dumps(listed) and owner._secret not in json.dumps(listed)  # ... the secret is not
        for params in ({"session": sid}, {"session": sid, "secret": "guess"}, {"session": sid, "secret": sid}):
            with pytest.raises(ServerError) as e:
                other.call("attach", params)
            assert e.value.code in ("bad_request", "forbidden"), e.value
        # the owner keeps its connection and its session
        assert owner.infer(obs[1]).session == sid
        assert other.objects(session=sid).frames == 2  # reading the map is not controlling it
        with pytest.raises(ServerError, match="controls no session"):
            other.infer(obs[2])
        # the owner itself, reconnecting, takes its session back with its secret
        owner._ws.close()
        assert owner.infer(obs[2]).session == sid and owner.objects(session=sid).frames == 3


def _poisoned_names(names: np.ndarray, code_point: int) -> np.ndarray:
    cp = np.ascontiguousarray(names).view(np.uint32).copy()
    cp[:: names.dtype.itemsize // 4] = code_point  # the first character of every name
    return cp.view(names.dtype)


def test_strings_that_are_not_unicode_never_reach_a_session():
    obs, _ = tour_observations()
    spec = toy_spec().to_dict()
    with served(MEMORY) as srv, PolicyClient(srv.url) as c:
        c.reset("look around", toy_spec())
        for cp in (0x110000, 0xD800, 0xDFFF, 0xFFFFFFFF):
            bad = dict(obs[0], **{"cameras/ego/label_names": _poisoned_names(obs[0]["cameras/ego/label_names"], cp)})
            with pytest.raises(ServerError) as e:
                c.infer(bad)
            assert e.value.code == "bad_request" and "not a Unicode character" in e.value.message
        ws = connect(srv.url + "/?format=json", compression=None)
        json.loads(ws.recv(timeout=5))
        texts = [
            {"id": 1, "method": "reset", "params": {"instruction": "\ud800", "spec": spec}},
            {"id": 2, "method": "map.query", "params": {"question": "where is the \udfff?"}},
            {"id": 3, "method": "reset", "params": {"instruction": "x", "spec": {**spec, "family": "\udbff"}}},
            {"id": 4, "method": "health", "params": {"\ud801": 1}},
        ]
        for msg in texts:
            ws.send(json.dumps(msg))  # json escapes the lone surrogates as \\udXXX, as a browser would
            r = json.loads(ws.recv(timeout=10))
            assert r["ok"] is False and r["error"]["code"] == "bad_request", r
            assert "not valid Unicode" in r["error"]["message"], r
        ws.close()
        # nothing was poisoned: the session steps, its map answers, and the listing encodes for everyone
        for o in obs[:3]:
            assert c.infer(o).action.shape == (2,)
        assert c.objects().frames == 3 and c.query(target="sofa").category == "sofa"
        with PolicyClient(srv.url) as other:
            assert [s["instruction"] for s in other.sessions()] == ["look around"]


@pytest.mark.parametrize(
    "field,value,names",
    [
        ("sensors", [1], "sensors"),
        ("sensors", "abc", "sensors"),
        ("sensors", {"x": {"shape": [1], "dtype": "O"}}, "dtype"),
        ("sensors", {"x": {"shape": [-3], "dtype": "<f4"}}, "shape"),
        ("sensors", {"x": 5}, "sensors['x']"),
        ("cameras", [{"name": "ego", "height": "a", "width": 3}], "height and width"),
        ("cameras", [{"name": "ego", "height": 10**9, "width": 3}], "height and width"),
        ("cameras", [{"name": 3, "height": 4, "width": 3}], "name"),
        ("cameras", 5, "cameras"),
        ("state", [1], "state"),
        ("action", {"low": [0.0], "high": [1.0]}, "missing field"),
        ("task", [1, 2], "task"),
        ("family", "", "family"),
    ],
)
def test_a_malformed_spec_is_a_bad_request_naming_the_field(field, value, names):
    spec = {**toy_spec().to_dict(), field: value}
    with served("random") as srv, PolicyClient(srv.url) as c:
        with pytest.raises(ServerError) as e:
            c.call("reset", {"instruction": "x", "spec": spec})
        assert e.value.code == "bad_request" and "malformed EnvSpec" in e.value.message, e.value
        assert names in e.value.message, e.value.message
        c.reset("x", toy_spec())  # the connection goes on


def test_messages_of_too_many_values_are_refused_before_they_are_built():
    with served("random", max_objects=10_000) as srv:
        ws = connect(srv.url, compression=None, max_size=None)
        unpack(ws.recv(timeout=5))
        heavy = [
            msgpack.packb({"id": 1, "method": "health", "params": {"x": [None] * 200_000}}),
            msgpack.packb({"id": 2, "method": "health", "params": {"x": [[0, 1]] * 5_000}}),
            msgpack.packb({"id": 3, "method": "health", "params": {f"k{i}": i for i in range(6_000)}}),
        ]
        for msg in heavy:
            ws.send(msg)
            r = unpack(ws.recv(timeout=30))
            assert r["ok"] is False and r["error"]["code"] == "bad_request", r
            assert "more than 10000 values" in r["error"]["message"], r
        ws.close()
        ws = connect(srv.url + "/?format=json", compression=None, max_size=None)
        ws.recv(timeout=5)
        ws.send('{"id": 4, "method": "health", "params": {"x": [' + "0," * 20_000 + "0]}}")
        r = json.loads(ws.recv(timeout=30))
        assert r["ok"] is False and "more than 10000 values" in r["error"]["message"], r
        ws.send('{"id": 5, "method": "health"}')
        assert json.loads(ws.recv(timeout=10))["ok"]
        ws.close()


def _snapshots_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, SpatialMemory) and o.read_only)


def test_the_query_cache_keeps_no_memory_alive_and_is_bounded_and_emptied():
    """The live page asks the same things after every new frame: its answers may be cached, the
    memory snapshots they came from may not (each is a copy of the whole map)."""
    obs, _ = tour_observations()
    with served(MEMORY, query_cache_mb=0.25) as srv, PolicyClient(srv.url) as sim, PolicyClient(srv.url) as page:
        sim.reset("look around", toy_spec())
        before = _snapshots_alive()
        for o in obs[:12]:
            sim.infer(o)
            page.objects(session=sim.session)
            page.topdown("medium", session=sim.session, width=64, height=48)
        assert _snapshots_alive() - before <= 1  # the current frame's snapshot, shared by every reader
        assert srv.queries.entries(sim.session) == 2  # the answers about the current frame only
        for w in range(16, 400, 8):  # many different maps: the cache stays within its bytes
            page.topdown("easy", session=sim.session, width=w, height=w)
        assert 0 < srv.queries.bytes <= 0.25 * 2**20
        sid = sim.session
        sim.end_session()
        assert srv.queries.entries(sid) == 0  # emptied with its session
        assert page.objects(session=sid).frames == 12  # the final map still answers


def test_per_peer_connections_idle_connections_and_sessions_are_capped():
    obs, _ = tour_observations()
    with served("random", max_connections_per_peer=2) as srv:
        with PolicyClient(srv.url) as a, PolicyClient(srv.url) as b:
            assert a.health()["connections"] == b.health()["connections"] == 2
            with pytest.raises(ConnectionRejected, match="503.*from this address"):
                PolicyClient(srv.url, reconnect=False).connect()
    with served("random", idle_timeout_s=0.5, max_sessions=2) as srv:
        a, b = PolicyClient(srv.url, reconnect=False).connect(), PolicyClient(srv.url).connect()
        a.reset("x", toy_spec())
        b.reset("x", toy_spec())
        b.close()  # its session is detached, still live
        # a connection that controls no session and says nothing is closed by the server
        ws = connect(srv.url, compression=None)
        unpack(ws.recv(timeout=5))
        with pytest.raises(websockets.ConnectionClosed) as e:
            ws.recv(timeout=30)
        assert e.value.rcvd is not None and e.value.rcvd.code == 1001 and "idle" in e.value.rcvd.reason
        with PolicyClient(srv.url) as c:
            with pytest.raises(ServerError) as e:
                c.reset("x", toy_spec())  # a third live session
            assert e.value.code == "limit" and "2 live sessions" in e.value.message
        # a connection controlling a session may pause (a simulator between episodes): still open
        assert a.infer(obs[0]).action.shape == (2,)  # (a does not reconnect: it would raise)
        a.close()


def test_frame_parameters_are_checked_on_every_map_query():
    wrong = [
        {"width": "abc"},
        {"width": 5},
        {"height": 10**6},
        {"frame": "nope"},
        {"extent_m": -1.0},
        {"extent_m": float("nan")},
        {"bogus": 1},
    ]
    with served(MEMORY) as srv, PolicyClient(srv.url) as c:
        c.reset("look around", toy_spec())  # a session whose memory is still empty
        for p in wrong:
            for method, extra in (("map.objects", {}), ("map.query", {"target": "sofa"}), ("map.topdown", {})):
                with pytest.raises(ServerError) as e:
                    c.call(method, {**extra, **p})
                assert e.value.code == "bad_request", (method, p, e.value)
        assert c.objects().frames == 0  # and right parameters still answer
    with served("random") as srv, PolicyClient(srv.url) as c:
        c.reset("x", toy_spec())  # an agent that keeps no memory at all
        with pytest.raises(ServerError) as e:
            c.call("map.objects", {"width": "abc"})
        assert e.value.code == "bad_request"


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


@pytest.mark.slow
def test_soak_a_live_page_poller_for_minutes_keeps_the_server_flat():
    """A simulator steps the served memory agent through episode after episode while a poller does
    what the live page does, twice a second: list the sessions, read the object table, fetch the
    map when the frame count changed. The server's resident memory after a warm-up stays flat
    (on the server before the query cache was bounded it grew by every answered frame's snapshot).
    Minutes of wall time (VLA_SOAK_S, default 180); the assertion is on memory, not on time."""
    import threading
    import time
    import urllib.error
    import urllib.request

    duration = float(os.environ.get("VLA_SOAK_S", "180"))
    obs, _ = tour_observations()
    with serve_cli("agent=memory", "agent.memory=apartment") as url:
        stop = threading.Event()
        errors: list[str] = []
        steps = [0]

        def simulator() -> None:
            try:
                with PolicyClient(url) as c:
                    while not stop.is_set():
                        c.reset("look around", toy_spec())
                        for o in obs:
                            c.infer(o)
                            steps[0] += 1
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(f"simulator: {exc}")

        sim = threading.Thread(target=simulator, daemon=True)
        sim.start()
        port = url.rsplit(":", 1)[1]
        page = connect(url + "/?format=json", compression=None, origin=f"http://127.0.0.1:{port}")
        json.loads(page.recv(timeout=10))
        rss: list[tuple[float, float]] = []
        t0, last_frames, polls, n = time.monotonic(), None, 0, 0
        try:
            while time.monotonic() - t0 < duration:
                n += 1
                page.send(json.dumps({"id": n, "method": "sessions"}))
                assert json.loads(page.recv(timeout=30))["ok"]
                page.send(json.dumps({"id": -n, "method": "map.objects"}))
                r = json.loads(page.recv(timeout=30))
                if r["ok"] and r["result"]["frames"] and r["result"]["frames"] != last_frames:
                    last_frames = r["result"]["frames"]
                    q = f"session={r['result']['session']}&level=medium&t={last_frames}"
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/map.png?{q}", timeout=30) as img:
                            assert img.status == 200
                    except urllib.error.HTTPError as exc:  # the simulator may reset between the two calls
                        body = exc.read()[:300]  # (an empty memory is a 404 not_found, as the page expects)
                        if exc.code != 404 or b"the memory is empty" not in body:
                            raise AssertionError(f"map.png {q}: {exc.code} {body!r}") from None
                polls += 1
                if polls % 10 == 0:
                    rss.append((time.monotonic() - t0, _rss_mb(url.pid)))
                time.sleep(0.5)
        finally:
            stop.set()
            page.close()
            sim.join(60)
    assert not errors, errors
    assert steps[0] > 2 * len(obs), "the simulator barely stepped"
    settled = [m for t, m in rss if t >= duration / 3]
    growth = max(settled) - settled[0]
    assert growth < 48.0, f"server RSS grew by {growth:.0f} MiB while polled ({rss})"


def _frames_until_closed(sock, wait_s: float) -> list[tuple[int, bytes]]:
    """(opcode, payload) of the server's websocket frames on a raw socket that never answers, until the
    server closes it or ``wait_s`` passes (server frames are unmasked, RFC 6455 §5.2)."""
    import socket
    import time

    buf, frames, end = b"", [], time.monotonic() + wait_s
    while time.monotonic() < end:
        sock.settimeout(max(0.05, end - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 2:
            n, head = buf[1] & 0x7F, 2
            if n == 126:
                n, head = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127:
                n, head = int.from_bytes(buf[2:10], "big"), 10
            if len(buf) < head + n:
                break
            frames.append((buf[0] & 0x0F, buf[head : head + n]))
            buf = buf[head + n :]
    return frames


def _silent_websocket(port: int):
    """A websocket client that completes the handshake and then never reads or answers anything."""
    import socket

    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /?format=json HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def test_keepalive_pings_drop_a_client_that_never_answers_and_can_be_turned_off():
    """A client that stops answering (a frozen simulator, a cut cable) is dropped after the ping timeout,
    so its connection slot does not wait for idle_timeout_s; ping_interval_s=0 sends no pings at all
    (a client too busy to answer pings is never dropped for it)."""
    with pytest.raises(ValueError, match="ping_interval_s and ping_timeout_s"):
        ServeConfig(ping_timeout_s=-1)
    with served("random", ping_interval_s=0.2, ping_timeout_s=0.2, idle_timeout_s=3600) as srv:
        sock = _silent_websocket(srv.port)
        frames = _frames_until_closed(sock, wait_s=30)
        sock.close()
        opcodes = [op for op, _ in frames]
        assert 0x9 in opcodes, opcodes  # pinged
        assert opcodes[-1] == 0x8 and int.from_bytes(frames[-1][1][:2], "big") == 1011, frames[-1]
    with served("random", ping_interval_s=0, idle_timeout_s=3600) as srv:
        sock = _silent_websocket(srv.port)
        frames = _frames_until_closed(sock, wait_s=1.5)
        sock.close()
        assert [op for op, _ in frames if op in (0x8, 0x9)] == [], frames
