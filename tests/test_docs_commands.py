"""Every command in README.md and docs/*.md against the code (scripts/check_docs_commands.py): the
fast tier composes the config of each runnable vla-* command, so a renamed or removed option or
group fails here in seconds; ``make check-docs`` runs them all at tiny size (slow)."""

from __future__ import annotations

from tests.conftest import load_script

check = load_script("check_docs_commands")


def test_every_documented_vla_command_composes():
    blocks = check.extract()
    commands = [c for b in blocks for c in b.commands]
    assert len(commands) > 100 and {c.file for c in commands} >= {"README.md", "docs/POLICY.md", "docs/GST.md"}
    failures = check.compose_all(blocks)
    assert not failures, "\n".join(f"{c.where}: {err}" for c, err in failures)


def test_commands_are_read_as_written(tmp_path):
    """Continuation lines join, comments go, ``a ; b`` is two commands, diagrams are not commands,
    tiny overrides follow the env, and what needs a cluster or reads a skipped command's output is
    skipped with the reason."""
    doc = tmp_path / "example.md"
    doc.write_text(
        "```bash\n"
        "vla-rollout env=house env.split=test \\\n    agent=memory out=runs/a   # a comment\n"
        "vla-query --objects ; vla-query --sessions\n"
        "vla-gst generate split=train backend=ray ray.address=auto out=runs/q\n"
        "vla-gst eval agent=memory questions=runs/q out=runs/q_mem\n"
        "```\n\n```\nscripts/          benchmarks and tools\n```\n"
    )
    (block,) = check.extract([str(doc)])  # an absolute path is read as it is
    texts = [c.text for c in block.commands]
    assert texts[0] == "vla-rollout env=house env.split=test agent=memory out=runs/a"
    assert texts[1:3] == ["vla-query --objects", "vla-query --sessions"] and len(texts) == 5
    assert check.tiny(texts[0], {}) == "eval.trials_per_task=1 env.num_scenes=1 env.num_trials=1 env.max_steps=8"
    reasons = [r for _, r in check.decisions(block)]
    assert reasons[:3] == [None, None, None]
    assert "Ray cluster" in reasons[3] and "runs/q" in reasons[4]


def test_a_proofs_commands_run_where_the_proof_runs(tmp_path, monkeypatch):
    """scripts/proof_common.run: a proof's commands run in the proof's own directory, so that a relative
    ``--root`` is one place for both, and a docs check's scratch copy (whose scripts link the
    repository's) writes its own ``runs/`` -- not the repository's, as it did when they ran there."""
    import sys
    from pathlib import Path

    run = load_script("proof_common").run
    monkeypatch.chdir(tmp_path)
    run([sys.executable, "-c", "import os; open('runs/here.txt', 'w').write(os.getcwd())"], Path("runs/log.txt"))
    assert (tmp_path / "runs" / "here.txt").read_text() == str(tmp_path)
