"""Fuzz: well over a thousand malformed and hostile messages, each answered with an error reply on
the same connection, while a well-behaved client keeps stepping -- the fuzzer waits for its next
step every hundred messages, so a server that stalls it fails the test; afterwards no session is
poisoned (the fuzzing connection's own session, the listing, the map all still answer right) and
the well-behaved client still controls its session."""

from __future__ import annotations

import json
import pickle
import threading

import msgpack
import numpy as np
from websockets.sync.client import connect

from tests.serving import LinearModel, served, toy_spec, tour_observations
from vla.serve import ModelSessions, PolicyClient
from vla.serve.protocol import METHODS
from vla.wire.codec import unpack


def _array(data: bytes, dtype, shape) -> dict:
    return {"__ndarray__": True, "data": data, "dtype": dtype, "shape": shape}


def _not_unicode(names: np.ndarray, code_point: int) -> np.ndarray:
    cp = np.ascontiguousarray(names).view(np.uint32).copy()
    cp[0] = code_point
    return cp.view(names.dtype)


def hostile_messages(obs: dict, own: str, other: str) -> list[tuple[str, bytes | str]]:
    """What a hostile client sends beyond malformed syntax: strings that are not Unicode (in arrays,
    values and keys), messages of too many values, malformed sensor specs, map frames that make no
    sense on an empty memory (``own``: the fuzzing connection's session, nothing fused yet), and
    attempts to take over another client's session (``other``)."""
    out: list[tuple[str, bytes | str]] = []
    spec = toy_spec().to_dict()

    def infer(o):
        return msgpack.packb({"id": 9, "method": "infer", "params": {"observation": o}}, default=_np)

    names = obs["cameras/ego/label_names"]
    for cp in (0x110000, 0xD800, 0xDC00, 0xDFFF, 0x7FFFFFFF, 0xFFFFFFFF):
        out.append(("unicode array", infer({**obs, "cameras/ego/label_names": _not_unicode(names, cp)})))
        arr = _not_unicode(np.array(["sofa"]), cp)
        out.append(("unicode array param", msgpack.packb({"method": "health", "params": {"a": arr}}, default=_np)))
    for text in ("\ud800", "a\udfffb", "\udbff\udc00\ud800"):
        for msg in (
            {"id": 1, "method": "reset", "params": {"instruction": text, "spec": spec}},
            {"id": 2, "method": "map.query", "params": {"question": text, "session": own}},
            {"id": 3, "method": "reset", "params": {"instruction": "x", "spec": {**spec, "family": text}}},
            {"id": 4, "method": "health", "params": {text: 1}},
            {"id": text, "method": "health"},
        ):
            out.append(("unicode json", json.dumps(msg)))
    for n in (10_001, 50_000, 1_000_000):
        out.append(("many values", msgpack.packb({"method": "health", "params": {"x": [None] * n}})))
    out.append(("many values json", '{"method": "health", "params": {"x": [' + "0," * 20_000 + "0]}}"))
    out.append(("many keys", msgpack.packb({"method": "health", "params": {f"k{i}": 0 for i in range(8_000)}})))
    deep: object = [1]
    for _ in range(40):
        deep = [deep]
    out.append(("deep in an array", msgpack.packb({"method": "health", "params": {"x": [deep]}})))
    for sensors in ([1], "abc", {"x": 5}, {"x": {"shape": [1], "dtype": "|O"}}, {"x": {"shape": [-2], "dtype": "<f4"}}):
        msg = {"method": "reset", "params": {"instruction": "x", "spec": {**spec, "sensors": sensors}}}
        out.append(("reset sensors", msgpack.packb(msg)))
    for cams in ([{"name": "ego", "height": "a", "width": 3}], [{"name": "ego", "height": 10**9, "width": 9}], 4):
        msg = {"method": "reset", "params": {"instruction": "x", "spec": {**spec, "cameras": cams}}}
        out.append(("reset cameras", msgpack.packb(msg)))
    for frame in ({"width": "abc"}, {"width": 3}, {"height": 10**7}, {"frame": "x"}, {"extent_m": -1.0}):
        for method in ("map.objects", "map.query", "map.topdown"):
            p = {"session": own, **frame, **({"target": "sofa"} if method == "map.query" else {})}
            out.append(("empty map frame", msgpack.packb({"id": 8, "method": method, "params": p})))
    for params in ({"session": other}, {"session": other, "secret": "0" * 32}, {"session": other, "secret": other}):
        out.append(("takeover", msgpack.packb({"id": 7, "method": "attach", "params": params})))
    return out


def malformed_messages(rng: np.random.Generator, obs: dict) -> list[tuple[str, bytes | str]]:
    """(kind, payload) pairs, every one of which must be refused."""
    out: list[tuple[str, bytes | str]] = []
    good = msgpack.packb({"id": 1, "method": "map.query", "params": {"target": "sofa"}})
    spec = toy_spec().to_dict()
    for _ in range(400):
        out.append(("random bytes", rng.bytes(int(rng.integers(1, 300)))))
    for _ in range(60):
        out.append(("random text", "".join(chr(int(c)) for c in rng.integers(32, 127, int(rng.integers(1, 80))))))
    for _ in range(300):  # random trees of plain data, always with one parameter the method does not take
        method = str(rng.choice(METHODS))
        params = {f"zz{int(rng.integers(1000))}": _random_tree(rng, 3)}
        params.update({str(rng.choice(["target", "session", "level", "x"])): _random_tree(rng, 2)})
        msg = {"id": int(rng.integers(1 << 30)), "method": method, "params": params}
        out.append(("random tree", msgpack.packb(msg) if rng.random() < 0.7 else json.dumps(msg)))
    for cut in range(1, len(good)):
        out.append(("truncated", good[:cut]))
    for payload in (1, -5, 3.5, "infer", [1, 2], None, True, b"\x00", [{"method": "health"}]):
        out.append(("not a map", msgpack.packb(payload)))
    for method in (None, 3, 2.5, True, [], {}, "", "no.such", "map.delete", "__init__", "infer " * 30, "HEALTH"):
        out.append(("bad method", msgpack.packb({"id": 2, "method": method})))
    for rid in (True, 2.5, [], {}, "x" * 200):
        out.append(("bad id", msgpack.packb({"id": rid, "method": "health"})))
    out.append(("extra field", msgpack.packb({"id": 3, "method": "health", "evil": 1})))
    for params in (3, "x", [1], True):
        out.append(("params not a map", msgpack.packb({"id": 4, "method": "health", "params": params})))
    wrong_values = [None, 3, -1, 2.5, float("nan"), "x" * 5000, [], {}, [1, "a"], True, b"\xff" * 10]
    for method in METHODS:
        out.append(("unknown param", msgpack.packb({"id": 5, "method": method, "params": {"bogus": 1}})))
    # values that are legal for a parameter are left out of its list
    legal = {
        ("extent_m", "3"),
        ("extent_m", "2.5"),
        ("trajectory", "True"),
        ("objects", "[]"),
        ("seed", "3"),
        ("seed", "-1"),
        ("session", "''"),
        ("what", "[]"),
    }
    names = ["target", "question", "what", "level", "width", "height", "frame", "extent_m", "trajectory", "objects"]
    for name in names:
        for v in wrong_values:
            if v is None or (name, repr(v)) in legal:
                continue
            for method in ("map.query", "map.topdown", "map.objects"):
                p = {name: v}
                if method == "map.query" and name not in ("target", "question"):
                    p["target"] = "sofa"
                out.append((f"{method} {name}={str(v)[:20]}", msgpack.packb({"id": 6, "method": method, "params": p})))
    for v in wrong_values:
        out.append(
            ("reset instruction", msgpack.packb({"method": "reset", "params": {"instruction": v, "spec": spec}}))
        )
        out.append(("reset spec", msgpack.packb({"method": "reset", "params": {"instruction": "x", "spec": v}})))
        out.append(("attach", msgpack.packb({"method": "attach", "params": {"session": v}})))
        if v is None or ("seed", repr(v)) in legal or ("session", repr(v)) in legal:
            continue  # no seed / the default session
        out.append(
            ("reset seed", msgpack.packb({"method": "reset", "params": {"instruction": "x", "spec": spec, "seed": v}}))
        )
        out.append(("session", msgpack.packb({"method": "map.objects", "params": {"session": v}})))
    for broken in (
        {"family": "x"},
        {**spec, "action": {"low": [1], "high": [0], "names": ["a"]}},
        {**spec, "cameras": [{"name": 3}]},
        {**spec, "state": {"shape": "x"}},
    ):
        out.append(
            ("reset broken spec", msgpack.packb({"method": "reset", "params": {"instruction": "x", "spec": broken}}))
        )
    # arrays: forbidden dtypes, size mismatches, bad shapes, unknown fields
    for dtype in ("|O", "<c16", "|V4", ">f8", "<M8[s]", "float64", "", 7, None):
        out.append(("bad dtype", msgpack.packb({"method": "health", "params": {"a": _array(b"\0" * 8, dtype, [1])}})))
    for shape in ([3], [-1], [2**40], "8", [1.5], [True], list(range(12))):
        out.append(("bad shape", msgpack.packb({"method": "health", "params": {"a": _array(b"\0" * 8, "<f8", shape)}})))
    out.append(
        ("array extra", msgpack.packb({"method": "health", "params": {"a": {**_array(b"", "<f8", [0]), "x": 1}}}))
    )
    out.append(("array data", msgpack.packb({"method": "health", "params": {"a": _array("text", "<f8", [1])}})))
    # pickle, extension types, timestamps, non-string keys, deep nesting
    for proto in (2, 3, 4, 5):
        out.append(("pickle", pickle.dumps({"method": "health"}, protocol=proto)))
    out.append(("ext", msgpack.packb({"method": "health", "params": {"x": msgpack.ExtType(5, b"zz")}})))
    out.append(("timestamp", msgpack.packb({"method": "health", "params": {"x": msgpack.Timestamp(1)}})))
    out.append(("int keys", msgpack.packb({1: "health"})))
    deep: object = "x"
    for _ in range(100):
        deep = {"a": deep}
    out.append(("deep", msgpack.packb({"method": "health", "params": deep})))
    # JSON variants
    for text in (
        '{"method": NaN}',
        '{"method": "health", "params": {"x": Infinity}}',
        "[",
        '"health"',
        "{}",
        '{"method": "infer", "params": {"observation": {}}}',
        json.dumps({"method": "map.nope"}),
    ):
        out.append(("json", text))

    # observations: NaN, inf, wrong shapes and dtypes, missing and unknown keys, wrong types
    def infer(o):
        return msgpack.packb({"id": 9, "method": "infer", "params": {"observation": o}}, default=_np)

    for key in list(obs):
        out.append(("obs missing", infer({k: v for k, v in obs.items() if k != key})))
        v = obs[key]
        if isinstance(v, np.ndarray) and v.dtype.kind in "fiu" and v.size:
            for bad in (
                v.astype(np.complex128).real.astype(np.int8) if v.dtype.kind == "f" else v.astype(np.float32),
                v.reshape(-1)[: max(1, v.size // 2)],
                np.full_like(v, np.nan, dtype=np.float64),
            ):
                out.append(("obs value", infer({**obs, key: bad})))
        out.append(("obs wrong type", infer({**obs, key: 123 if key == "prompt" else "a string"})))
    for extra in ("cameras/ego/thermal", "sensors/lidar", "secret", "cameras//rgb"):
        out.append(("obs unknown key", infer({**obs, extra: np.zeros(2)})))
    out.append(("obs state NaN", infer({**obs, "state": np.array([0.0, np.nan, 1.0])})))
    out.append(("obs K inf", infer({**obs, "cameras/ego/K": np.full((3, 3), np.inf)})))
    out.append(("obs not a map", infer([1, 2, 3])))
    out.append(("seq", msgpack.packb({"method": "infer", "params": {"observation": {}, "seq": -3}})))
    return out


def _random_tree(rng: np.random.Generator, depth: int):
    kind = int(rng.integers(7 if depth > 0 else 5))
    if kind == 0:
        return int(rng.integers(-(2**40), 2**40))
    if kind == 1:
        return float(rng.normal())
    if kind == 2:
        return "".join(chr(int(c)) for c in rng.integers(32, 0x3000, int(rng.integers(0, 12))))
    if kind == 3:
        return bool(rng.integers(2))
    if kind == 4:
        return None
    if kind == 5:
        return [_random_tree(rng, depth - 1) for _ in range(int(rng.integers(0, 4)))]
    return {f"k{int(rng.integers(100))}": _random_tree(rng, depth - 1) for _ in range(int(rng.integers(0, 4)))}


def _np(obj):
    if isinstance(obj, np.ndarray):
        return _array(np.ascontiguousarray(obj).tobytes(), obj.dtype.str, list(obj.shape))
    raise TypeError(type(obj))


class Progress:
    """The well-behaved client's steps, and a way to wait for the next one."""

    def __init__(self) -> None:
        self.steps = 0
        self.cond = threading.Condition()

    def step(self) -> None:
        with self.cond:
            self.steps += 1
            self.cond.notify_all()

    def wait_beyond(self, n: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.steps > n, timeout)


def _fuzz(srv, fuzz, messages, progress: Progress, bad_replies, stalls) -> None:
    """Send every message on one connection; each must get an error reply there. Every hundred
    messages the well-behaved client must have stepped again (a generous wait, not a timing)."""
    for i, (kind, payload) in enumerate(messages):
        if i % 100 == 0:
            seen = progress.steps
            if not progress.wait_beyond(seen, 60):
                stalls.append(f"the well-behaved client made no step while message {i} ({kind}) was handled")
        fuzz.send(payload)
        raw = fuzz.recv(timeout=60)
        reply = json.loads(raw) if isinstance(raw, str) else msgpack.unpackb(raw, raw=False)
        if reply.get("ok") is not False or not reply.get("error", {}).get("message"):
            bad_replies.append(f"{kind}: {str(reply)[:200]}")
        elif reply["error"]["code"] == "internal":
            bad_replies.append(f"{kind} answered internal: {reply['error']['message'][:200]}")


def _call(ws, method, params=None, rid=77):
    ws.send(msgpack.packb({"id": rid, "method": method, "params": params or {}}, default=_np))
    return unpack(ws.recv(timeout=30))


def test_a_thousand_malformed_messages_then_correct_answers():
    rng = np.random.default_rng(1234)
    obs, _ = tour_observations()
    model = LinearModel()
    policy = ModelSessions(model, memory={"memory": "apartment", "inputs": ["objects"]})
    bad_replies: list[str] = []
    good_errors: list[str] = []
    stalls: list[str] = []
    progress = Progress()
    stop = threading.Event()
    with served(policy) as srv:
        good_session: list[str] = []

        # a well-behaved simulator steps all along
        def good_client() -> None:
            try:
                with PolicyClient(srv.url) as c:
                    good_session.append(c.reset("look around", toy_spec()))
                    i = 0
                    while not stop.is_set() and i < 100_000:
                        o = obs[i % len(obs)]
                        r = c.infer(o)
                        if not np.allclose(r.action, LinearModel.expected(o["state"])):
                            good_errors.append(f"step {i}: {r.action}")
                        i += 1
                        progress.step()
            except Exception as exc:  # noqa: BLE001 - reported below
                good_errors.append(f"the well-behaved client failed: {type(exc).__name__}: {exc}")

        t = threading.Thread(target=good_client, daemon=True)
        t.start()
        fuzz = connect(srv.url, compression=None, legacy=True, max_size=None)
        try:
            assert msgpack.unpackb(fuzz.recv(timeout=5))["event"] == "metadata"
            # the fuzzing connection controls a session too, so infer messages reach validation
            r = _call(fuzz, "reset", {"instruction": "x", "spec": toy_spec().to_dict()})
            assert r["ok"], r
            own = r["result"]["session"]
            assert progress.wait_beyond(0, 120), good_errors
            messages = malformed_messages(rng, obs[0]) + hostile_messages(obs[0], own, good_session[0])
            assert len(messages) >= 1000
            _fuzz(srv, fuzz, messages, progress, bad_replies, stalls)
            # nothing was poisoned: the fuzzing connection's session steps and its map answers ...
            for k in range(3):
                r = _call(fuzz, "infer", {"observation": obs[k]})
                assert r["ok"] and np.allclose(r["result"]["action"], LinearModel.expected(obs[k]["state"])), r
            r = _call(fuzz, "map.query", {"question": "where is the sofa?", "session": own})
            assert r["ok"] and r["result"]["category"] == "sofa", r
            assert _call(fuzz, "map.objects", {"session": own})["result"]["frames"] == 3
            # ... every session is listed (all encodable), the good one still controlled by its own client
            listed = {x["session"]: x for x in _call(fuzz, "sessions")["result"]["sessions"]}
            assert listed[good_session[0]]["state"] == "active" and listed[own]["instruction"] == "x"
        finally:
            fuzz.close()
            steps_during_fuzz = progress.steps
            stop.set()
            t.join(60)
        with PolicyClient(srv.url) as c:
            assert len(c.sessions()) == 2
            c.reset("look around", toy_spec())
            for o in obs:
                assert np.allclose(c.infer(o).action, LinearModel.expected(o["state"]))
            assert c.query(question="where is the sofa?", session=c.session).category == "sofa"
            h = c.health()
    assert not stalls, stalls[:3]
    assert not bad_replies, (
        f"{len(bad_replies)} messages were not refused cleanly: {[b[:80] for b in bad_replies[:10]]}"
    )
    assert not good_errors, good_errors[:3]
    assert steps_during_fuzz >= len(messages) // 100  # it stepped at least once per hundred messages
    assert h["errors"] >= 1000


def test_each_session_keeps_its_own_memory_of_frames():
    """A served policy with a memory of frames (``inputs.history``) keeps one per session: each session's
    model input holds its own earlier frames, a reset starts afresh, and a skipped step is that session's
    error only."""
    obs, _ = tour_observations()
    seen: list[dict] = []

    class Recording(LinearModel):
        def infer_batch(self, observations):
            seen.extend(observations)
            return super().infer_batch(observations)

    policy = ModelSessions(Recording(), frames=(2, "ego"))
    for s in ("a", "b"):
        policy.reset(s, "look around", toy_spec())
    policy.infer_batch(["a"], [obs[0]])
    policy.infer_batch(["a", "b"], [obs[1], obs[0]])
    a1, b0 = seen[1], seen[2]
    assert np.array_equal(a1["memory/frames/0"], obs[0]["cameras/ego/rgb"])
    assert np.array_equal(b0["memory/frames/0"], obs[0]["cameras/ego/rgb"]) and "memory/frames/1" in b0
    out = policy.infer_batch(["a", "b"], [obs[5], obs[1]])  # a skips steps 2-4
    assert isinstance(out[0], RuntimeError) and "needs every frame" in str(out[0])
    assert np.allclose(out[1], LinearModel.expected(obs[1]["state"]))
    policy.reset("a", "look around", toy_spec())
    assert not isinstance(policy.infer_batch(["a"], [obs[0]])[0], Exception)
