"""End to end: ``vla-serve`` in one process, ``vla-rollout agent=remote eval.workers=2`` in another,
``vla-query`` and a headless Chromium on the live page in a third -- all real, on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import pytest

from spatial_memory import SpatialMemory
from tests.browser import Chromium, find_chromium
from tests.conftest import VENV_BIN, cli_env
from tests.serving import serve_cli, served_process
from vla.serve import PolicyClient

ROOT = Path(__file__).resolve().parents[1]
HOUSE = [
    "env=house",
    "env.split=test",
    "env.num_scenes=1",
    "env.width=96",
    "env.height=96",
    "env.use_meshes=false",
    "env.render_map=false",
]


def rollout(*args: str, **kw) -> subprocess.CompletedProcess | subprocess.Popen:
    cmd = [str(VENV_BIN / "vla-rollout"), *HOUSE, "progress=false", *args]
    if kw.get("background"):
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=ROOT)
    return subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=600)


def query_cli(url: str, *args: str) -> tuple[int, dict]:
    r = subprocess.run(
        [sys.executable, "-m", "vla.serve.cli", "query", "--url", url, *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def episodes(out: Path) -> dict[tuple[int, int], dict]:
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return {(r["task_id"], r["trial"]): r for r in rows}


def test_remote_rollout_with_workers_matches_in_process_and_vla_query_reads_its_maps(tmp_path):
    common = ["env.num_trials=2", "env.max_steps=40", "eval.trials_per_task=2", "eval.workers=2"]
    with serve_cli("agent=memory") as url:
        r = rollout(*common, "agent=remote", f"agent.url={url}", f"out={tmp_path / 'remote'}")
        assert r.returncode == 0, r.stderr[-3000:]
        local = rollout(*common, "agent=memory", f"out={tmp_path / 'local'}")
        assert local.returncode == 0, local.stderr[-3000:]
        remote_eps, local_eps = episodes(tmp_path / "remote"), episodes(tmp_path / "local")
        assert sorted(remote_eps) == sorted(local_eps) == [(0, 0), (0, 1)]
        for key, rec in remote_eps.items():
            assert rec["error"] is None, rec
            # the same seeded agent, served or in-process, takes the same steps
            assert (rec["steps"], rec["success"]) == (local_eps[key]["steps"], local_eps[key]["success"]), key
        steps = [rec["steps"] for rec in remote_eps.values()]
        with PolicyClient(url) as c:
            health = c.health()
        assert health["inferred"] == sum(steps)  # every step was one infer on the server

        code, out = query_cli(url, "--sessions")
        sessions = out["sessions"]
        assert code == 0 and len(sessions) == 2 and sorted(s["steps"] for s in sessions) == sorted(s - 1 for s in steps)
        frames = []
        for s in sessions:
            code, out = query_cli(url, "--session", s["session"], "--objects", "--snapshot", str(tmp_path / "m.npz"))
            assert code == 0
            mem = SpatialMemory.load(tmp_path / "m.npz")
            frames.append(mem.n_frames)
            assert {o.id for o in mem.objects()} == {o["id"] for o in out["objects"]["objects"]}
        assert Counter(frames) == Counter(steps)  # one fused frame per step of its own episode

        sid = sessions[0]["session"]
        first = query_cli(url, "--session", sid, "--objects")[1]["objects"]["objects"]
        assert first, "the memory agent saw no object"
        cat = first[0]["category"]
        code, out = query_cli(url, "--session", sid, f"where is the {cat.replace('_', ' ')}?")
        assert code == 0 and out["answer"]["category"] == cat
        row = next(o for o in first if o["id"] == out["answer"]["id"])
        assert (
            out["answer"]["direction_deg"] == row["direction_deg"] and out["answer"]["distance_m"] == row["distance_m"]
        )
        code, out = query_cli(url, "--session", sid, "--target", cat, "--what", "direction,distance")
        assert code == 0 and set(out["answer"]) >= {"direction_deg", "distance_m"} and "point" not in out["answer"]
        code, out = query_cli(url, "--session", sid, "show me the map", "--png", str(tmp_path / "map.png"))
        img = cv2.imread(str(tmp_path / "map.png"))
        assert code == 0 and img.shape == (512, 640, 3)
        code, out = query_cli(url, "--session", sid, "where is the grand piano?")
        assert code == 1 and out["error"]["code"] == "not_found"


def test_live_page_follows_a_running_rollout_in_headless_chromium(tmp_path):
    if find_chromium() is None:
        pytest.skip("no chromium on PATH: `make test` installs Debian's chromium where apt-get is available")
    from envs.registry import make_env

    env = make_env({"name": "house", "split": "test", "num_scenes": 1, "use_meshes": False}, 0)
    truth_categories = {o.category for o in env.scene_truth().objects}
    env.close()
    with serve_cli("agent=memory", "token=t0ken") as url:
        port = url.rsplit(":", 1)[1]
        with Chromium(f"http://127.0.0.1:{port}/?token=t0ken") as page:
            # the page is up before any simulator: it says so, and keeps polling
            page.wait_for("document.getElementById('status').textContent.includes('no session yet')", timeout=60)
            run = rollout(
                "env.num_trials=3",
                "env.max_steps=150",
                "eval.trials_per_task=3",
                "eval.workers=1",
                "agent=remote",
                f"agent.url={url}",
                "agent.token=t0ken",
                f"out={tmp_path / 'run'}",
                background=True,
            )
            try:
                page.wait_for(
                    "document.querySelectorAll('#objects tbody tr').length > 0 && "
                    "document.getElementById('map').naturalWidth > 0",
                    timeout=120,
                )
                f1 = page.evaluate("document.getElementById('status').dataset.frames")
                # the page updates by itself while the episodes run
                page.wait_for(f"document.getElementById('status').dataset.frames !== '{f1}'", timeout=60)
                # a new episode starts with an empty map: read the table once it has rows again
                page.wait_for("document.querySelectorAll('#objects tbody tr').length > 0", timeout=60)
                shown = page.evaluate(
                    "[...document.querySelectorAll('#objects tbody tr')].map(r => r.dataset.category)"
                )
                assert shown and set(shown) <= truth_categories, (shown, truth_categories)
                size = page.evaluate(
                    "[document.getElementById('map').naturalWidth, document.getElementById('map').naturalHeight]"
                )
                assert size == [640, 512]
                run.wait(300)
                assert run.returncode == 0, run.stderr.read()[-3000:]
                with PolicyClient(url, token="t0ken") as c:
                    final = c.objects()
                    # after the run: the page shows exactly what the server's map says
                    page.wait_for(f"document.getElementById('status').dataset.frames === '{final.frames}'", 30)
                    rows = page.evaluate(
                        "[...document.querySelectorAll('#objects tbody tr')].map(r => "
                        "[r.dataset.id, +r.dataset.direction, +r.dataset.distance])"
                    )
                    assert rows == [[o["id"], o["direction_deg"], o["distance_m"]] for o in final.objects]
                    cat = final.objects[-1]["category"]
                    question = f"where is the {cat.replace('_', ' ')}?"
                    page.evaluate(
                        f"document.getElementById('question').value = {json.dumps(question)};"
                        "document.getElementById('askbtn').click(); true"
                    )
                    text = page.wait_for(
                        "(t => t && t !== '…' ? t : null)(document.getElementById('answer').textContent)", 30
                    )
                    assert text == c.query(question=question).text
                page.screenshot(tmp_path / "live_page.png")
            finally:
                if run.poll() is None:
                    run.kill()
                    run.wait(10)
    assert (tmp_path / "live_page.png").stat().st_size > 10_000
    assert np.isfinite([r[1] for r in rows]).all()


def test_a_policy_server_killed_mid_run_stops_the_run_and_the_same_command_retries_its_episode(tmp_path):
    """The server is SIGKILLed while it serves trial 1: the run stops with the reason, the episode in
    flight is an infrastructure error (in infra_errors.jsonl and the summary, not a failed episode,
    not in the success rate), and the same command, once a server is back on the address, runs it."""
    marker = tmp_path / "release"
    agent = {"name": "tests.agents_for_tests:HangOnTrialAgent", "marker": str(marker), "trial": 1}
    out = tmp_path / "run"
    with served_process(agent) as (url, server):
        args = ["env.num_trials=3", "eval.trials_per_task=3", "env.max_steps=15", "eval.workers=1", "agent=remote"]
        args += [f"agent.url={url}"]
        args += ["agent.reconnect_timeout_s=1", f"out={out}"]
        proc = rollout(*args, background=True)
        try:
            while not (tmp_path / "release.held").exists():  # trial 0 is done, trial 1 is held on the server
                assert proc.poll() is None, proc.communicate()[1][-3000:]
                threading.Event().wait(0.05)
        finally:
            server.kill()
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err[-3000:]
    assert f"the policy server {url} cannot be reached" in err and "run the same command again" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["episodes"] == 1 and summary["errors"] == 0
    assert summary["success_rate"] == summary["successes"]  # over the one finished episode, not over 2
    assert summary["infra_errors"] == 1 and summary["not_counted"][0]["trial"] == 1
    infra = [json.loads(line) for line in (out / "infra_errors.jsonl").read_text().splitlines()]
    assert [(r["trial"], r["infra"]) for r in infra] == [(1, "agent_unavailable")]
    assert sorted(episodes(out)) == [(0, 0)]

    marker.touch()
    port = int(url.rsplit(":", 1)[1])
    with served_process(agent, port=port):
        r = rollout(*args)  # the same command
    assert r.returncode == 0, r.stderr[-3000:]
    eps = episodes(out)
    assert sorted(eps) == [(0, 0), (0, 1), (0, 2)] and all(e["error"] is None for e in eps.values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["episodes"] == 3 and summary["infra_errors"] == 0
