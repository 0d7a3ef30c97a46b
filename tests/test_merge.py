"""eval.shard=k/n and vla-merge: shards are contiguous blocks of the plan, each resumable in its own
dir; the merge is exactly the unsharded run, and refuses a missing or a duplicated episode by name."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, cli_env
from vla.eval.evaluate import EvalSpec, evaluate
from vla.eval.merge import MergeError, merge
from vla.eval.shard import parse_shard, select_shard, shard_bounds

HOUSE = {"name": "house", "num_scenes": 2, "num_trials": 5, "width": 64, "height": 64, "use_meshes": False}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_time(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def run(out: Path, shard: str | None = None, **kw) -> dict:
    spec = EvalSpec(env={**HOUSE, "max_steps": 8}, agent={"name": "random"}, out=str(out), trials_per_task=5,
                    workers=0, shard=shard, **kw)  # fmt: skip
    return evaluate(spec, progress=False)


def test_shards_are_contiguous_blocks_that_cover_the_plan_once():
    plan = [(t, k, f"t{t}") for t in range(3) for k in range(7)]  # 21 episodes
    blocks = [select_shard(plan, f"{k}/4") for k in range(4)]
    assert [len(b) for b in blocks] == [6, 5, 5, 5]  # sizes differ by at most one, the first ones larger
    assert sum(blocks, []) == plan  # in order, each once
    assert blocks[1][0] == (0, 6, "t0") and blocks[1][-1] == (1, 3, "t1")  # consecutive trials
    assert shard_bounds(3, 2, 5) == (2, 3) and shard_bounds(3, 4, 5) == (3, 3)  # more shards than episodes
    for bad in ("4/4", "1", "a/b", "-1/3", "0/0"):
        with pytest.raises(ValueError, match="eval.shard"):
            parse_shard(bad)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    whole = run(root / "whole")
    for k in range(3):
        run(root / f"s{k}", f"{k}/3")
    return root, whole


def test_merged_shards_are_the_unsharded_run(shards, tmp_path):
    root, whole = shards
    sizes = [len(lines(root / f"s{k}" / "episodes.jsonl")) for k in range(3)]
    assert sizes == [4, 3, 3]
    summary = merge([str(root / "s*")], tmp_path / "m")
    assert without_time(lines(tmp_path / "m" / "episodes.jsonl")) == without_time(
        lines(root / "whole" / "episodes.jsonl")
    )
    expected = {k: v for k, v in whole.items() if k not in ("shard",)}
    got = {k: v for k, v in summary.items() if k in expected}
    assert got == expected and summary["complete"] is True and summary["planned"] == 10
    assert json.loads((tmp_path / "m" / "summary.json").read_text())["episodes"] == 10
    # a shard's own summary covers its block only
    s1 = json.loads((root / "s1" / "summary.json").read_text())
    assert s1["planned"] == 3 and s1["shard"] == "1/3" and s1["complete"] is True


def _copy(root: Path, tmp: Path) -> list[Path]:
    import shutil

    dirs = []
    for k in range(3):
        shutil.copytree(root / f"s{k}", tmp / f"s{k}")
        dirs.append(tmp / f"s{k}")
    return dirs


def test_merge_names_the_missing_and_the_duplicated_episodes(shards, tmp_path):
    root, _ = shards
    dirs = _copy(root, tmp_path)
    s1 = dirs[1] / "episodes.jsonl"
    kept = s1.read_text().splitlines(keepends=True)
    gone = json.loads(kept[1])
    s1.write_text(kept[0] + kept[2])  # one episode of shard 1 lost
    first = (dirs[0] / "episodes.jsonl").read_text().splitlines(keepends=True)[0]
    with open(dirs[2] / "episodes.jsonl", "a") as f:
        f.write(first)  # an episode of shard 0 recorded again in shard 2
    with pytest.raises(MergeError) as info:
        merge([str(d) for d in dirs], tmp_path / "m")
    err = info.value
    assert err.missing == [(gone["task_id"], gone["trial"])]
    dup = (json.loads(first)["task_id"], json.loads(first)["trial"])
    assert list(err.duplicated) == [dup] and len(err.duplicated[dup]) == 2
    assert f"({gone['task_id']}, {gone['trial']})" in str(err) and "more than once" in str(err)
    assert not (tmp_path / "m" / "episodes.jsonl").exists()  # nothing written
    # twice in one file is a duplicate too, and a shard left out is named
    (dirs[1] / "episodes.jsonl").write_text(kept[0] + kept[0] + kept[1] + kept[2])
    with pytest.raises(MergeError, match="shards not given: 1/3") as info:
        merge([str(dirs[0]), str(dirs[2])], tmp_path / "m")
    r = subprocess.run(
        [sys.executable, "-m", "vla.cli.merge", f"out={tmp_path / 'm'}", f"shards=[{dirs[0]},{dirs[1]},{dirs[2]}]"],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 2 and "more than once" in r.stderr and "Traceback" not in r.stderr


def test_a_shard_dir_belongs_to_one_shard_and_resumes(shards, tmp_path):
    root, _ = shards
    dirs = _copy(root, tmp_path)
    with pytest.raises(ValueError, match="holds shard 0/3"):
        run(dirs[0], "1/3")
    with pytest.raises(ValueError, match="holds shard 0/3"):
        run(dirs[0])
    path = dirs[2] / "episodes.jsonl"
    kept = path.read_text().splitlines(keepends=True)
    path.write_text("".join(kept[:1]) + kept[1][:20])  # killed: one episode done, a torn line
    s = run(dirs[2], "2/3")
    assert s["complete"] and without_time(lines(path)) == without_time([json.loads(x) for x in kept])
    with pytest.raises(ValueError, match="another configuration"):
        other = EvalSpec(env={**HOUSE, "max_steps": 9}, agent={"name": "random"}, out=str(tmp_path / "o"),
                         trials_per_task=5, workers=0, shard="1/3")  # fmt: skip
        evaluate(other, progress=False)
        merge([str(dirs[0]), str(tmp_path / "o")], tmp_path / "m")


@pytest.mark.slow
def test_side_logs_merge_into_what_one_run_writes(tmp_path):
    """Mid-episode GST questions (gst.jsonl, summary 'gst') over 2 shards equal the unsharded run's (~1 min)."""
    env = {"name": "house", "num_scenes": 1, "use_meshes": False, "max_steps": 24}
    gst = {"every": 12}

    def go(out, shard=None):
        from vla.cli.rollout import spec_from_config
        from vla.config import compose

        cfg = compose("rollout", ["env=house", "agent=memory", f"gst.every={gst['every']}", f"out={out}"])
        spec = spec_from_config(cfg)
        spec.env = {**cfg["env"], **env}
        spec.trials_per_task, spec.workers, spec.shard = 2, 0, shard
        return evaluate(spec, progress=False)

    whole = go(tmp_path / "whole")
    for k in range(2):
        go(tmp_path / f"s{k}", f"{k}/2")
    merged = merge([str(tmp_path / "s0"), str(tmp_path / "s1")], tmp_path / "m")
    rows = lambda d: [{k: v for k, v in r.items() if k != "seconds"} for r in lines(d / "gst.jsonl")]  # noqa: E731
    assert rows(tmp_path / "m") == rows(tmp_path / "whole") and rows(tmp_path / "whole")
    assert merged["gst"] == whole["gst"]


@pytest.mark.slow
def test_slurm_array_of_four_suites_merges_into_exactly_the_plan(tmp_path):
    """scripts/slurm/libero_eval.sbatch as 8 array tasks (4 suites x 2 shards, run here one after the
    other as SLURM would run them), then scripts/slurm/libero_merge.sh (~2 min)."""
    import os

    from tests.conftest import VENV_BIN

    bin_dir = tmp_path / "bin"  # the vla-* commands as an installed checkout has them
    bin_dir.mkdir()
    for name, module in (("vla-rollout", "vla.cli.rollout"), ("vla-merge", "vla.cli.merge")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {VENV_BIN / "python"} -m {module} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = {**cli_env(), "VLA_BIN": str(bin_dir), "SLURM_ARRAY_TASK_COUNT": "8", "SLURM_CPUS_PER_TASK": "1"}
    small = ["agent=random", "env.render=false", "env.hard_reset=false", "env.max_steps=5", "eval.tasks=[0]",
             "eval.trials_per_task=3"]  # fmt: skip
    out = tmp_path / "libero"
    for i in range(8):
        r = subprocess.run(
            ["bash", str(ROOT / "scripts/slurm/libero_eval.sbatch"), str(out), *small],
            env={**env, "SLURM_ARRAY_TASK_ID": str(i)},
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/shard_*")) == [
        f"{s}/shard_{k}"
        for s in sorted(("libero_10", "libero_goal", "libero_object", "libero_spatial"))
        for k in (0, 1)
    ]
    r = subprocess.run(["bash", str(ROOT / "scripts/slurm/libero_merge.sh"), str(out)], env=env, capture_output=True,
                       text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    for suite in ("libero_spatial", "libero_object", "libero_goal", "libero_10"):
        s = json.loads((out / suite / "summary.json").read_text())
        assert s["suite"] == suite and s["planned"] == s["episodes"] == 3 and s["complete"] is True
        keys = [(e["task_id"], e["trial"]) for e in lines(out / suite / "episodes.jsonl")]
        assert keys == [(0, 0), (0, 1), (0, 2)]
    assert os.path.exists(out / "libero_10" / "plan.json")
