"""One run-identity check (``run.json``) for evaluation, training and GST answers: a new run's identity
is written atomically (a temporary file moved into place), a different one is refused naming what
differs, the same one resumes."""

from __future__ import annotations

import json
import os

import pytest

from vla.eval.identity import check_identity


class Replaces:
    """Records ``os.replace`` calls (and passes them on), or dies in one as a killed process would."""

    def __init__(self, monkeypatch, die: bool = False) -> None:
        self.calls, self.die, self._real = [], die, os.replace
        monkeypatch.setattr(os, "replace", self)

    def __call__(self, src, dst) -> None:
        self.calls.append((os.fspath(src), os.fspath(dst)))
        if self.die:
            raise KeyboardInterrupt("killed between writing the temporary file and moving it")
        self._real(src, dst)


def test_a_new_identity_is_written_atomically_the_same_resumes_a_different_one_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "run"
    spy = Replaces(monkeypatch)
    check_identity(out, {"env": {"name": "house", "size": (64, 48)}, "seed": 7})
    run_file = out / "run.json"
    assert json.loads(run_file.read_text()) == {"env": {"name": "house", "size": [64, 48]}, "seed": 7}
    assert spy.calls == [(str(out / "run.json.tmp"), str(run_file))] and not list(out.glob("*.tmp"))
    check_identity(out, {"seed": 7, "env": {"size": [64, 48], "name": "house"}})  # the same run, as read back
    with pytest.raises(ValueError) as err:
        check_identity(
            out, {"env": {"name": "house", "size": (64, 64)}, "seed": 8}, holds="episodes of a different run"
        )
    msg = str(err.value)
    assert "holds episodes of a different run" in msg and str(run_file) in msg
    assert "env.size: [64, 48] there, [64, 64] now" in msg and "seed: 7 there, 8 now" in msg
    (out / "run.json").write_text("{torn")
    with pytest.raises(ValueError, match="run.json is not a run's identity"):
        check_identity(out, {"seed": 7})


def test_notes_are_rewritten_atomically_and_a_killed_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    check_identity(tmp_path, {"agent": {"name": "random"}, "questions": "a"}, compare=("agent",))
    before = (tmp_path / "run.json").read_text()
    Replaces(monkeypatch, die=True)
    with pytest.raises(KeyboardInterrupt):
        check_identity(tmp_path, {"agent": {"name": "random"}, "questions": "b"}, compare=("agent",))
    assert (tmp_path / "run.json").read_text() == before  # never half-written
    monkeypatch.undo()
    check_identity(tmp_path, {"agent": {"name": "random"}, "questions": "b"}, compare=("agent",))
    assert json.loads((tmp_path / "run.json").read_text())["questions"] == "b"
    with pytest.raises(ValueError, match=r"agent.name: 'random' there, 'memory' now"):
        check_identity(tmp_path, {"agent": {"name": "memory"}, "questions": "b"}, compare=("agent",))


def test_training_runs_keep_their_identity_through_the_shared_check(tmp_path, monkeypatch):
    from vla.train.distributed import Dist
    from vla.train.loop import _check_identity

    cfg = {
        "model": {"arch": "tiny"},
        "policy": {"chunk": 1},
        "data": {"paths": ["d"]},
        "train": {"lr": 1e-4, "steps": 5},
    }
    spy = Replaces(monkeypatch)
    _check_identity(tmp_path, cfg, Dist("single"))
    assert [dst for _, dst in spy.calls] == [str(tmp_path / "run.json")]  # written atomically
    _check_identity(tmp_path, {**cfg, "train": {"lr": 1e-4, "steps": 50}}, Dist("single"))  # more steps: same run
    with pytest.raises(ValueError, match=r"another configuration .*train.lr: 0.0001 there, 0.001 now"):
        _check_identity(tmp_path, {**cfg, "train": {"lr": 1e-3, "steps": 5}}, Dist("single"))
    # an option added later, at its default, is the run made before it; another value is another run
    _check_identity(tmp_path, {**cfg, "data": {"paths": ["d"], "instructions": "own"}}, Dist("single"))
    with pytest.raises(ValueError, match=r"data.instructions: '<unset>' there, 'shuffled' now"):
        _check_identity(tmp_path, {**cfg, "data": {"paths": ["d"], "instructions": "shuffled"}}, Dist("single"))


def test_gst_answers_resume_under_the_same_agent_and_refuse_another(gst, tmp_path, capsys):
    """``vla-gst eval``: a rerun with the same agent and perception resumes (under a profile with tuples
    in it, too), another agent is refused naming the difference."""
    from vla.gst.cli import main as gst_main

    args = [f"questions={gst}", f"out={tmp_path / 'answers'}", "progress=false", "perception=realistic"]
    assert gst_main(["eval", "agent=random", *args]) == 0
    assert gst_main(["eval", "agent=random", *args]) == 0
    capsys.readouterr()
    assert gst_main(["eval", "agent=memory", *args]) == 2
    err = capsys.readouterr().err
    # the differences are named in key order (the first six): the memory agent's options the random one lacks
    assert "predictions of another agent or perception profile" in err
    assert "agent.answer_from: '<unset>' there, 'memory' now" in err and "agent.camera: '<unset>' there" in err
