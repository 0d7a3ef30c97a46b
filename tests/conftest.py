import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


def load_script(name: str):
    """A script of ``scripts/`` (or a one-off of ``analyses/``) as a module (``load_script("gst_table")``),
    registered in sys.modules."""
    import importlib.util

    if str(ROOT / "scripts") not in sys.path:  # as running it would: its sibling scripts import by name
        sys.path.insert(0, str(ROOT / "scripts"))
    path = ROOT / "scripts" / f"{name}.py"
    path = path if path.exists() else ROOT / "analyses" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cli_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="session")
def gst(tmp_path_factory):
    """A tiny GST question set (one train apartment, 64 px) written by ``vla-gst generate``, plus a
    hand-made TDS-E question (one scene has no distractor scenes)."""
    import json

    from vla.gst.cli import main as gst_main

    out = tmp_path_factory.mktemp("gst") / "q"
    per_scene = "{EDv: 1, EDs: 1, GPv: 1, Pos: 1, Traj: 1}"
    args = ["generate", "env.use_meshes=false", "env.width=64", "env.height=64", "split=train", "scenes=1"]
    args += [f"out={out}", "progress=false", "gen.views=2", "gen.stride=3", f"gen.per_scene={per_scene}"]
    assert gst_main(args) == 0
    # the TDS options are the set's own map files
    q = json.loads((out / "questions.jsonl").read_text().splitlines()[0])
    maps = sorted(str(p.relative_to(out)) for p in (out / "maps").glob("*.png"))
    tds = {
        "id": "hand-TDS-E-1",
        "subtask": "TDS-E",
        "scene": q["scene"],
        "prompt": "Which of the top-down images A-D shows the scene?",
        "media": {"video": q["media"]["video"], "stream": q["media"]["stream"], "options": maps + maps[:1]},
        "answer": {"type": "choice", "value": "B"},
        "meta": {"level": "easy", "num_options": 4},
    }
    with open(out / "questions.jsonl", "a") as fh:
        fh.write(json.dumps(tds) + "\n")
    return out
