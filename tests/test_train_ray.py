"""vla-train through torchrun on Ray nodes (vla/train/ray_launch.py): on a local Ray instance, one
node with two processes (gloo on CPU) gives the losses of one process with the same global batch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, cli_env

pytest.importorskip("torch")
pytest.importorskip("ray", reason="the Ray launcher needs the ray extra")

from tests.test_train import BASE, _log, _train, demos  # noqa: E402,F401 - the recorded demonstrations fixture


@pytest.mark.slow
def test_torchrun_on_ray_nodes_equals_one_process(demos, tmp_path):  # noqa: F811
    args = [
        f"data.paths=[{demos}]",
        "data.val_fraction=0",
        "train.steps=3",
        "train.batch_size=4",
        "train.lr=1e-3",
        "train.log_every=1",
        "train.save_every=0",
        "train.plot=false",
        "train.export=false",
    ]
    single, launched = tmp_path / "single", tmp_path / "ray"
    _train([*args, f"out={single}"])
    cmd = [sys.executable, "-m", "vla.train.ray_launch", "--nodes", "1", "--nproc-per-node", "2", "--"]
    r = subprocess.run(
        [*cmd, *BASE, *args, "train.strategy=ddp", f"out={launched}"],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    a, b = _log(single), _log(launched)
    assert [x["step"] for x in a] == [x["step"] for x in b] == [1, 2, 3]
    for x, y in zip(a, b):
        assert abs(x["loss"] - y["loss"]) <= 1e-5 * abs(x["loss"])
    assert Path(launched / "checkpoints" / "step_3").is_dir()


def test_launcher_refuses_what_the_cluster_cannot_place():
    r = subprocess.run(
        [sys.executable, "-m", "vla.train.ray_launch", "--nodes", "0"],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 2 and "--nodes" in r.stderr and "Traceback" not in r.stderr
