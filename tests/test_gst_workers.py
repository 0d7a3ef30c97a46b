"""``vla-gst eval workers=N``: questions answered in several processes give the answers of one process,
whole sensor streams per worker, and a failing worker stops the run with its reason."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from vla.gst.answer_pool import WorkerFailed, answer_in_workers, share_out, stream_key
from vla.gst.cli import main as gst_main


@pytest.fixture(scope="module")
def two_scenes(tmp_path_factory):
    """Two train apartments at 64 px: two sensor streams."""
    out = tmp_path_factory.mktemp("gst2") / "q"
    per_scene = "{EDv: 1, EDs: 1, GPv: 1, Pos: 1, Ori: 1}"
    args = ["generate", "env.use_meshes=false", "env.width=64", "env.height=64", "split=train", "scenes=2"]
    args += [f"out={out}", "progress=false", "gen.views=2", "gen.stride=3", f"gen.per_scene={per_scene}"]
    assert gst_main(args) == 0
    return out


def _predictions(path):
    return {r["id"]: r for r in map(json.loads, (path / "predictions.jsonl").read_text().splitlines())}


def test_two_workers_answer_as_one_process_does(two_scenes, tmp_path):
    rows = [json.loads(x) for x in (two_scenes / "questions.jsonl").read_text().splitlines()]
    assert len({r["media"]["stream"] for r in rows}) == 2, "the test needs two sensor streams"
    base = ["eval", "agent=memory", "perception=realistic", f"questions={two_scenes}", "progress=false"]
    assert gst_main(base + [f"out={tmp_path / 'one'}"]) == 0
    assert gst_main(base + [f"out={tmp_path / 'two'}", "workers=2"]) == 0
    one, two = _predictions(tmp_path / "one"), _predictions(tmp_path / "two")
    assert set(one) == {r["id"] for r in rows}
    assert one == two
    assert sum(r["prediction"] is not None for r in one.values()) >= len(rows) - 1  # answers, not errors
    # resuming with workers: nothing is answered twice, a dropped answer is answered again
    lines = (tmp_path / "two" / "predictions.jsonl").read_text().splitlines()
    (tmp_path / "two" / "predictions.jsonl").write_text("\n".join(lines[:-2]) + "\n")
    assert gst_main(base + [f"out={tmp_path / 'two'}", "workers=2"]) == 0
    again = (tmp_path / "two" / "predictions.jsonl").read_text().splitlines()
    assert len(again) == len(lines) and _predictions(tmp_path / "two") == one


def test_streams_are_not_split_and_the_load_is_balanced():
    def q(i, stream):
        return SimpleNamespace(id=f"q{i}", media={"stream": stream} if stream else {})

    qs = [q(i, "a") for i in range(5)] + [q(5 + i, "b") for i in range(3)] + [q(8 + i, "c") for i in range(2)]
    qs.append(q(10, None))  # no stream: a group of its own
    shares = share_out(qs, 2)
    assert [sorted(s) for s in shares] == [
        sorted(["q0", "q1", "q2", "q3", "q4", "q10"]),
        sorted(["q5", "q6", "q7", "q8", "q9"]),
    ]
    by_id = {x.id: x for x in qs}
    for s in shares:  # a stream lives in one share only
        assert all(
            {stream_key(by_id[i]) for i in s}.isdisjoint({stream_key(by_id[j]) for j in t})
            for t in shares
            if t is not s
        )
    assert share_out(qs, 20) and len(share_out(qs, 20)) == 4  # no more workers than streams
    assert sorted(i for s in share_out(qs, 3) for i in s) == sorted(x.id for x in qs)


def test_a_failing_worker_stops_the_run_with_its_reason(tmp_path):
    from vla.config import compose

    cfg = compose("gst", ["agent=memory", f"questions={tmp_path / 'nowhere'}"])
    qs = [SimpleNamespace(id="a", media={"stream": "s1"}), SimpleNamespace(id="b", media={"stream": "s2"})]
    rows = []
    with pytest.raises(WorkerFailed, match="question worker failed"):
        answer_in_workers(cfg, qs, 2, rows.append)
    assert rows == []


def test_workers_must_be_a_positive_integer(two_scenes, tmp_path, capsys):
    args = ["eval", "agent=random", f"questions={two_scenes}", f"out={tmp_path / 'x'}", "progress=false"]
    assert gst_main(args + ["workers=0"]) == 2
    assert "workers must be a positive integer" in capsys.readouterr().err
