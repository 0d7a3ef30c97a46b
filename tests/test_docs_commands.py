"""Every command in README.md and docs/*.md against the code (scripts/check_docs_commands.py): the
fast tier parses each documented command's arguments with its own program's parsing, without running
its work -- the config of every vla-* command (vla-data's, vla-merge's too), vla-query's and every
script's argparse parser (scripts/docs_flags.py) -- so a renamed or removed option, an unknown flag or
a bad choice fails here in seconds, naming the doc file, line and command; ``make check-docs`` runs
them all at tiny size (slow)."""

from __future__ import annotations

from collections import Counter

from tests.conftest import load_script

check = load_script("check_docs_commands")
flags = load_script("docs_flags")


def _report(failures) -> str:
    return "\n".join(f"{c.where}: {err}\n    {c.text}" for c, err in failures)


def test_every_documented_command_parses_with_its_own_program():
    blocks = check.extract()
    commands = [c for b in blocks for c in b.commands]
    assert len(commands) > 100 and {c.file for c in commands} >= {"README.md", "docs/POLICY.md", "docs/GST.md"}
    parsed = {(c.where, c.text): flags.kind(p) for c, p, _, _ in check.parsed_commands(blocks)}
    kinds = Counter(parsed.values())
    # every kind of documented command is parsed, each as many times as the docs hold about (loose bounds)
    least = {"vla-rollout": 60, "vla-gst": 25, "vla-train": 5, "vla-serve": 3, "vla-data": 15, "vla-query": 5}
    least.update({"vla-merge": 1, "script": 40, "python -m": 5, "vla-experiment": 20})
    assert all(kinds[k] >= n for k, n in least.items()), kinds
    failures = check.compose_all(blocks)
    assert not failures, _report(failures)


BAD = [  # (a documented command with one bad argument, that argument, its fix, what the error names)
    (".venv/bin/python scripts/perturb_sweep.py --root runs/p --factorz robot agent=scripted", "z", "s", "--factorz"),
    ("scripts/perturb_sweep.py --root runs/p --factors robot,fog agent=scripted", "fog", "noise", "['fog']"),
    ("scripts/perturb_sweep.py --root runs/p agent=scripted env.perturb=camera:9", ":9", ":3", "levels 0-3"),
    ("OMP_NUM_THREADS=1 .venv/bin/vla-experiment house_bins select=best", "best", "val", "'best'"),
    (".venv/bin/vla-experiment gst_qa arms=[memroy] stage=train", "memroy", "memory", "memroy"),
    ("vla-experiment libero_object_oft stage=tset", "tset", "test", "'tset'"),
    ("vla-experiment libero_objet_oft", "objet", "object", "libero_objet_oft"),
    (".venv/bin/python scripts/bench_memory.py --quick --frame 3", "--frame 3", "--stages", "arguments: --frame"),
    ("python -m vla.detector render --out runs/f --split dev --count 3", "dev", "val", "invalid choice: 'dev'"),
    ("vla-data spatial-eval checkpoint=runs/c data=runs/d out=runs/e limt=40", "limt", "limit", "option 'limt'"),
    ("vla-data libero suite=libero_goal noops=cut out=runs/data", "cut", "drop", "noops"),
    ("vla-data spatial family=house scenes=2 viewz=6 out=runs/s", "viewz", "views", "viewz"),
    ("vla-data spatial family=house tasks=[presence,colr] out=runs/s", "colr", "colour", "['colr']"),
    ("vla-query --objects --level extreme", "extreme", "hard", "invalid choice: 'extreme'"),
    ("vla-merge out=runs/m shards=[runs/a] recrod=runs/r", "recrod", "record", "recrod"),
    ("vla-rollout env=libero env.perturb=fog:1 out=runs/x", "fog", "light", "unknown factor 'fog'"),
    ("vla-rollout env=house --cfg --verbose out=runs/x", "--verbose ", "", "--verbose"),
    ("vla-rollout env=house agent=memory agent.follow=route out=runs/f", "=route", "=routes", "'route'"),
    ("vla-rollout ... agent=memory agent.navigator.approach=0.6", "approach", "approach_m", "approach"),  # a fragment
    ("vla-gst generate perception=foo out=runs/q", "foo", "harsh", "choose from gt, harsh, learned, realistic"),
    ("vla-train model=tiny_qwen2_5_vl train.stepz=2 out=runs/t", "stepz", "steps", "train.stepz"),
    ("vla-serve agent=memory portt=8765", "portt", "port", "portt"),
    (  # a loop over values, a variable of variables
        'B=agent=memory\nA="env=house $B"\nfor p in gt fog; do\n  vla-rollout $A perception=$p out=runs/n_$p\ndone',
        "fog", "harsh", "'fog'",
    ),
    ("for s in 0 1; do vla-rollout env=house env.bogus=$s out=runs/b_$s || break; done", "bogus", "seed", "env.bogus"),
]  # fmt: skip


def test_a_bad_flag_or_choice_in_a_documented_command_fails_naming_the_file_and_command(tmp_path, monkeypatch):
    """Each command of :data:`BAD` planted in a markdown file (a fragment's given arguments, a loop's
    command for each value of the loop included) fails the check at its own line, with its program's
    error; the same commands with the bad argument fixed pass, and a template is not read as arguments.
    The checker's own tiny arguments (what ``--run`` appends) are parsed too."""
    good = [cmd.replace(bad, fix) for cmd, bad, fix, _ in BAD]
    doc, fixed = tmp_path / "bad.md", tmp_path / "good.md"
    doc.write_text("".join(f"```bash\n{cmd}\n```\n\n" for cmd, *_ in BAD))
    template = "vla-data convert src=DIR to=no_noops|lerobot out=OUT [fps=N]"  # not arguments: not checked
    fixed.write_text("".join(f"```bash\n{cmd}\n```\n\n" for cmd in [*good, template]))
    failures = check.compose_all(check.extract([str(doc)]))
    report = _report(failures)
    assert len(failures) == len(BAD), report
    lines = doc.read_text().splitlines()
    for (c, err), (cmd, *_, named) in zip(failures, BAD):
        assert c.file == str(doc) and lines[c.line - 1].strip() in cmd, report  # the doc file and the command
        assert named in err, f"{named!r} not in: {err}"
    assert not check.compose_all(check.extract([str(fixed)])), _report(check.compose_all(check.extract([str(fixed)])))

    doc.write_text("```bash\n.venv/bin/python scripts/bench_data.py --episodes 10 --out runs/b.json\n```\n")
    assert not check.compose_all(check.extract([str(doc)]))
    monkeypatch.setitem(check.SCRIPT_ARGS, "scripts/bench_data.py", "--episodez 1")  # --run's arguments drift
    ((c, err),) = check.compose_all(check.extract([str(doc)]))
    assert "tiny arguments (--episodez 1)" in err and "--episodez" in err and c.line == 2


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
    """vla/experiment/common.run: an experiment's commands run in the experiment's own directory, so that a
    relative ``root`` is one place for both, and a docs check's scratch copy (whose scripts link the
    repository's) writes its own ``runs/`` -- not the repository's, as it did when they ran there."""
    import sys
    from pathlib import Path

    from vla.experiment.common import run

    monkeypatch.chdir(tmp_path)
    run([sys.executable, "-c", "import os; open('runs/here.txt', 'w').write(os.getcwd())"], Path("runs/log.txt"))
    assert (tmp_path / "runs" / "here.txt").read_text() == str(tmp_path)
