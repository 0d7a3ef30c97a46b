"""Named experiments (vla/experiment/, configs/experiment/): every recipe loads and has its own identity;
options are checked; the test stage runs once per recipe identity unless forced, and each completed
test is counted in the ledger; ``make proof`` is the named replay experiment."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vla.experiment import cli, ledger
from vla.experiment.recipe import RECIPES_DIR, load, names

ROOT = Path(__file__).resolve().parents[1]


def test_every_named_recipe_loads_with_an_identity_of_its_own():
    found = names()
    assert {"replay_proof", "libero_object_oft_perturbed", "house_routes_token", "gst_qa_ego_embeddings"} <= set(found)
    hashes = {load(n).content_hash(): n for n in found}
    assert len(hashes) == len(found)  # two names for one recipe would split its test count
    for n in found:
        assert load(n).summary, f"{n}: a recipe says what it makes and where it is quoted"


def test_a_kind_that_saves_no_checkpoints_takes_any_step_count():
    assert load("house_replay", {"steps": 2}).options.steps == 2  # replay: one final policy


def test_the_identity_changes_with_the_recipe_not_with_how_it_runs():
    base = load("libero_object_oft_perturbed")
    assert load("libero_object_oft_perturbed", {"workers": 2}).content_hash() == base.content_hash()
    assert load("libero_object_oft_perturbed", {"steps": 1000}).content_hash() != base.content_hash()
    assert load("libero_object_oft").content_hash() != base.content_hash()  # only the arm noise differs


@pytest.mark.parametrize(
    "argv, message",
    [
        (["nope"], "no experiment 'nope'"),
        (["house_bins", "stepz=3"], "stepz"),
        (["house_bins", "select=best"], "'best'"),
        (["gst_qa", "arms=[memroy]"], "memroy"),
        (["house_bins", "house_recipe=bin"], "house_recipe"),
        (["libero_object_oft", "recipe=pi0"], "recipe must be"),
        (["libero_object_oft", "stage=tset"], "'tset'"),
        (["libero_object_oft", "steps"], "KEY=VALUE"),
        (["steps=3"], "usage"),
        (["gst_memory_agent", "steps=3"], "does not read ['steps']"),
        (["gst_memory_agent", "profiles=[gt,foggy]"], "foggy"),
        (["libero_object_oft", "steps=10"], "steps (10) must be a multiple of checkpoints (4)"),
        (["house_replay", "family=kitchen"], "family must be"),
        (["openpi_loop", "trials=0"], "trials and replan_steps must be >= 1"),
        (["gst_learned_detector", "epochs=0"], "epochs must be >= 1"),
    ],
)
def test_bad_command_lines_are_refused_with_what_is_wrong(argv, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cli.options(argv)


def test_the_makefile_proof_is_the_named_replay_experiment():
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^proof: setup\n\t\$\(VENV\)/bin/vla-experiment replay_proof root=\$\(PROOF\)\n", make, re.M)
    assert (RECIPES_DIR / "replay_proof.yaml").exists()


def _fake_kind(monkeypatch, result):
    """The libero kind replaced by one that returns ``result`` and counts its calls (nothing runs)."""
    calls = []

    def libero(a):
        calls.append(a.stage)
        return result

    monkeypatch.setattr("vla.experiment.libero.libero", libero)
    return calls


def test_a_recipe_is_tested_once_unless_forced_and_every_test_is_counted(tmp_path, monkeypatch):
    calls = _fake_kind(monkeypatch, {"val": {"step_4-chunk": 0.9}, "test": {"success": 0.88, "episodes": 50}})
    book = tmp_path / "uses.jsonl"
    recipe = load("libero_object_oft_perturbed", {"steps": 8})
    first = cli.run(recipe, "all", tmp_path / "r", ledger_path=book)
    assert first["tests_before"] == 0 and calls == ["all"]
    rows = ledger.read(book)
    assert [(r["experiment"], r["hash"], r["forced"]) for r in rows] == [
        ("libero_object_oft_perturbed", recipe.content_hash(), False)
    ]
    assert rows[0]["result"] == {"success": 0.88, "episodes": 50}
    with pytest.raises(ledger.TestUsed, match="tested 1 time"):
        cli.run(recipe, "test", tmp_path / "r2", ledger_path=book)
    assert calls == ["all"]  # refused before anything ran
    cli.run(recipe, "table", tmp_path / "r", ledger_path=book)  # reading the result again is no use
    cli.run(recipe, "train", tmp_path / "r", ledger_path=book)  # neither is training
    assert len(ledger.read(book)) == 1
    again = cli.run(recipe, "test", tmp_path / "r2", force=True, ledger_path=book)
    assert again["tests_before"] == 1 and [r["forced"] for r in ledger.read(book)] == [False, True]
    other = load("libero_object_oft_perturbed", {"steps": 16})  # another recipe: its own count
    res = cli.run(other, "test", tmp_path / "r3", ledger_path=book)
    assert res["tests_before"] == 0 and res["test_set_uses_before"] == 2  # the same 50 official states
    assert res["test_set"] == "libero/libero_object/task0/official"
    saved = json.loads((tmp_path / "r" / "recipe.json").read_text())
    assert saved["hash"] == recipe.content_hash() and saved["options"]["steps"] == 8


def test_the_repository_ledger_names_todays_recipes():
    """Every line of docs/experiments/test_uses.jsonl names a recipe and its current identity: a change
    to a recipe or to an option's default changes the identity, and the ledger must say so deliberately
    (else the old test would no longer refuse a re-test)."""
    rows = ledger.read()
    assert rows, "the ledger holds the tests run before the named recipes"
    for r in rows:
        recipe = load(r["experiment"])
        assert (r["hash"], r["test_set"]) == (recipe.content_hash(), recipe.test_set()), r["experiment"]
    assert len(ledger.uses(load("libero_object_oft_perturbed").content_hash())) == 2  # 44/50, then 43/50
    assert len(ledger.set_uses("libero/libero_object/task0/official")) == 6  # L1-L6 (L3: openpi's loop)


def test_an_unfinished_test_is_no_use(tmp_path, monkeypatch):
    """A test stage that ends without a test result (killed, or nothing chosen on val) writes no line, so
    running it again resumes instead of being refused."""
    _fake_kind(monkeypatch, {"val": {}, "test": {}})
    book = tmp_path / "uses.jsonl"
    recipe = load("libero_object_oft", {"steps": 8})
    cli.run(recipe, "test", tmp_path / "r", ledger_path=book)
    cli.run(recipe, "test", tmp_path / "r", ledger_path=book)
    assert ledger.read(book) == []


def test_the_replay_proof_is_a_pipeline_check_with_no_test_set(tmp_path, monkeypatch):
    runs = []
    monkeypatch.setattr("vla.experiment.replay.replay", lambda a: runs.append(a.stage) or {"test": {"ok": True}})
    book = tmp_path / "uses.jsonl"
    for _ in range(2):
        cli.run(load("replay_proof"), "all", tmp_path / "r", ledger_path=book)
    assert runs == ["all", "all"] and ledger.read(book) == []


def test_the_command_line_reaches_the_recipe_and_its_root(tmp_path, monkeypatch):
    seen = {}

    def fake_run(recipe, stage, root, force=False, ledger_path=None):
        seen.update(name=recipe.name, stage=stage, root=root, force=force, steps=recipe.options.steps)
        return {}

    monkeypatch.setattr(cli, "run", fake_run)
    assert cli.main(["house_bins", "stage=train", "steps=40", "force=true", f"root={tmp_path}"]) == 0
    assert seen == {"name": "house_bins", "stage": "train", "root": tmp_path, "force": True, "steps": 40}
    assert cli.main(["house_bins"]) == 0 and seen["root"] == Path("runs/experiments/house_bins")
    assert cli.main(["house_bins", "stepz=1"]) == 2


def test_the_memory_agents_gst_runs_compose_as_the_tools_read_them(tmp_path, monkeypatch):
    """``gst_eval`` (the README's first numbers): the test questions generated once, then the memory agent
    offline and mid-episode under each profile, and random answers beside them; commands captured."""
    from vla.config import compose
    from vla.experiment import gst_eval

    seen: list[list[str]] = []
    monkeypatch.setattr(gst_eval, "run", lambda cmd, log: seen.append(cmd))
    book = tmp_path / "uses.jsonl"
    cli.run(load("gst_memory_agent"), "all", tmp_path / "r", ledger_path=book)
    tools = [(Path(c[0]).name, c[1] if Path(c[0]).name == "vla-gst" else None) for c in seen]
    assert tools[0] == ("vla-gst", "generate") and tools.count(("vla-gst", "eval")) == 4
    assert tools.count(("vla-rollout", None)) == 4
    profiles = []
    for c in seen[1:]:
        tool = Path(c[0]).name
        cfg = compose("rollout" if tool == "vla-rollout" else "gst", c[1:] if tool == "vla-rollout" else c[2:])
        profiles.append((tool, cfg["agent"]["name"], cfg.get("perception", {}).get("name", "gt") or "gt"))
    assert sorted(p for p in profiles if p[1] == "memory") == sorted(
        (t, "memory", p) for t in ("vla-gst", "vla-rollout") for p in ("gt", "realistic", "harsh")
    )
    assert ledger.read(book) == []  # nothing ran, nothing scored: no use


def test_every_rollouts_recipe_composes_and_runs_its_commands(tmp_path, monkeypatch):
    """``rollouts`` (the expert's and the navigator's rows): each run's overrides compose as vla-rollout reads
    them (the env's own checks included), and the runner adds only its out= and workers=."""
    from vla.config import check_config, compose
    from vla.experiment import rollouts

    names_ = [n for n in names() if load(n).kind == "rollouts"]
    assert {"expert_libero", "expert_heldout", "nav_memory", "nav_profiles"} <= set(names_)
    for n in names_:
        seen: list[list[str]] = []
        monkeypatch.setattr(rollouts, "run", lambda cmd, log, seen=seen: seen.append(cmd))
        recipe = load(n, {"workers": 2})
        cli.run(recipe, "test", tmp_path / n, ledger_path=tmp_path / "uses.jsonl")
        assert len(seen) == len(recipe.options.runs)
        for cmd, (run_name, overrides) in zip(seen, recipe.options.runs.items()):
            assert cmd[1 : 1 + len(overrides)] == overrides
            assert cmd[-3:] == ["eval.workers=2", f"out={tmp_path / n / 'test' / run_name}", "progress=false"]
            check_config(compose("rollout", cmd[1:]))
    with pytest.raises(ValueError, match="runner's"):
        load("nav_memory", {"runs": {"x": ["env=house", "out=runs/x"]}})


def test_stage_1_generates_trains_selects_and_tests_as_the_tools_read_it(tmp_path, monkeypatch):
    """``spatial`` (stage 1): three question sets, one training run without cameras, every checkpoint scored
    on val, the best on test beside the blind baseline; stage 2's tuned arm starts from its checkpoint."""
    from vla.config import compose
    from vla.data.cli import options as data_options
    from vla.experiment import spatial

    seen: list[list[str]] = []
    monkeypatch.setattr(spatial, "run", lambda cmd, log: seen.append(cmd))
    R = tmp_path / "r"
    for step in (500, 1000):  # two finished checkpoints, as training leaves them, and their val scores
        (R / "train" / "checkpoints" / f"step_{step}").mkdir(parents=True)
        (R / "val" / f"step_{step}").mkdir(parents=True)
        (R / "val" / f"step_{step}" / "scores.json").write_text(json.dumps({"overall": 31.0 - step / 1000}))
    res = cli.run(load("spatial_stage1_control"), "all", R, ledger_path=tmp_path / "uses.jsonl")
    tools = [(Path(c[0]).name, c[1]) for c in seen]
    assert tools[:3] == [("vla-data", "spatial")] * 3 and tools[3][0] == "vla-train"
    for c in seen[:3]:
        data_options(c[1:])  # vla-data's own checks
        assert "tasks=[presence,colour]" in c and "per_view=4" in c
    train = compose("train", seen[3][1:])
    assert train["data"]["kind"] == "spatial" and list(train["policy"]["inputs"]["cameras"]) == []
    evals = [c for c in seen if c[1] == "spatial-eval"]
    assert [c[2] for c in evals][-1].endswith("step_500")  # the best on val goes to test, not the last
    assert res["val"] == {"step_500": 30.5, "step_1000": 30.0} and res["test"]["policy"]["checkpoint"] == "step_500"
    tuned = load("libero_stage2_tuned").options.init_from
    assert tuned.startswith("runs/experiments/spatial_stage1/train/checkpoints/")


def test_the_apartments_chosen_arm_is_tested_under_each_sensor_profile(tmp_path, monkeypatch):
    """``house`` with ``profiles`` (RESULTS 2.8): the arm chosen on val (under gt) is tested under every
    profile -- its memory fed by that profile's frames -- with the navigator under the same sensors and
    random once; each result is kept apart and says its profile; commands composed as vla-rollout reads them."""
    from vla.config import check_config, compose
    from vla.experiment import house

    seen: list[list[str]] = []

    def fake(cmd, log):
        seen.append(cmd)
        out = Path(next(x for x in cmd if x.startswith("out="))[4:])
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps({"episodes": 2, "success_rate": 0.5, "errors": 0}))
        rows = [{"success": True, "visible_at_start": False}, {"success": False, "visible_at_start": True}]
        (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    monkeypatch.setattr(house, "run", fake)
    R = tmp_path / "r"
    (R / "train/memory/round0/checkpoints/step_2000").mkdir(parents=True)
    (R / "train/memory/round0/summary.json").write_text("{}")
    recipe = load("house_routes_token_sensors")
    assert recipe.test_set() == load("house_routes_token").test_set()  # the 20 test apartments: log H counts it
    res = cli.run(recipe, "test", R, ledger_path=tmp_path / "uses.jsonl")
    rollouts = [c for c in seen if Path(c[0]).name == "vla-rollout"]
    got = {}
    for c in rollouts:
        cfg = compose("rollout", c[1:])
        check_config(cfg)
        split = cfg["env"]["split"]
        got.setdefault(split, []).append((cfg["agent"]["name"], cfg.get("perception", {}).get("name") or "gt"))
        if cfg["agent"]["name"] == "vla":
            assert cfg["agent"]["checkpoint"].endswith("memory/round0/checkpoints/step_2000")
            assert cfg["agent"]["replan"] == 1
    assert got["val"] == [("vla", "gt")]  # chosen under gt
    assert sorted(got["test"]) == sorted(
        [("vla", p) for p in ("gt", "realistic", "harsh")]
        + [("memory", p) for p in ("gt", "realistic", "harsh")]
        + [("random", "gt")]
    )
    assert set(res["test"]) == {
        "memory",
        "memory_realistic",
        "memory_harsh",
        "memory_navigator",
        "memory_navigator_realistic",
        "memory_navigator_harsh",
        "random",
    }
    assert res["test"]["memory_harsh"]["perception"] == "harsh" and res["test"]["memory"]["perception"] == "gt"
    assert "| memory_realistic | realistic | 2 |" in house.house_table(res)


def test_openpis_loop_runs_against_a_served_checkpoint_and_the_server_always_stops(tmp_path, monkeypatch):
    """``openpi`` (RESULTS 6.1): vla-serve serves the recipe's checkpoint with openpi's protocol on loopback,
    the LIBERO loop plays the recipe's states against that port, and the server is stopped even when the
    loop fails; a checkpoint that is not there is refused before anything starts."""
    from vla.config import compose
    from vla.experiment import openpi

    servers, clients = [], []

    class Server:
        def __init__(self, cmd, **kw):
            self.cmd, self.stopped = cmd, False
            servers.append(self)

        def poll(self):
            return None

        def terminate(self):
            self.stopped = True

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(openpi.subprocess, "Popen", Server)
    monkeypatch.setattr(openpi, "_wait", lambda server, port, log: None)
    monkeypatch.setattr(openpi, "run", lambda cmd, log: clients.append(cmd))
    recipe = load("openpi_loop")
    assert recipe.test_set() == "libero/libero_object/task0/official"  # log L's states
    with pytest.raises(SystemExit, match="no checkpoint"):
        cli.run(recipe, "test", tmp_path / "r", ledger_path=tmp_path / "uses.jsonl")
    assert servers == []
    ck = tmp_path / "step_2000"
    ck.mkdir()
    recipe = load("openpi_loop", {"policy_path": str(ck)})
    cli.run(recipe, "test", tmp_path / "r", ledger_path=tmp_path / "uses.jsonl")
    (server,), (client,) = servers, clients
    cfg = compose("serve", server.cmd[1:])
    assert (cfg["protocol"], cfg["host"], cfg["policy_path"], cfg["env"]["name"]) == (
        "openpi", "127.0.0.1", str(ck), "libero"
    )  # fmt: skip
    port = cfg["port"]
    assert server.stopped and Path(client[1]).name == "openpi_libero_eval.py"
    args = dict(zip(client[2::2], client[3::2]))
    assert args == {
        "--host": "127.0.0.1", "--port": str(port), "--suite": "libero_object", "--task": "0", "--trials": "5",
        "--replan-steps": "8", "--out": str(tmp_path / "r" / "test"),
    }  # fmt: skip

    def failing(cmd, log):
        raise SystemExit("failed")

    monkeypatch.setattr(openpi, "run", failing)
    with pytest.raises(SystemExit):
        cli.run(recipe, "test", tmp_path / "r", ledger_path=tmp_path / "uses.jsonl")
    assert len(servers) == 2 and servers[1].stopped


def test_the_house_replay_recipe_is_the_command_that_made_row_2_1(tmp_path, monkeypatch):
    """``replay`` with ``family: house`` (RESULTS 2.1): the recording, the over-fit and the check compose to
    the configs of the commands run at ed717ec (docs/RESULTS.md, C6), paths aside."""
    from vla.config import check_config, compose
    from vla.experiment import replay

    seen: list[list[str]] = []
    monkeypatch.setattr(replay, "run", lambda cmd, log: seen.append(cmd))
    R = tmp_path / "r"
    (R / "demo").mkdir(parents=True)
    (R / "demo" / "house_0_demo.hdf5").write_text("")
    cli.run(load("house_replay"), "all", R, ledger_path=tmp_path / "uses.jsonl")
    record, train, check = seen
    navigator = "+agent.teacher.navigator={initial_turns: 0, replan_every: 1, switch_margin_m: 0.0}"
    c6_record = [
        "env=house", "env.stop_action=true", "env.split=train", "env.num_scenes=1", "eval.trials_per_task=2",
        "agent=dagger", "agent.beta=1.0", "agent.execute_bins=256", navigator, f"record={R / 'demo'}",
    ]  # fmt: skip
    ours = compose("rollout", record[1:])
    check_config(ours)
    assert _without(ours, "out", "progress") == _without(compose("rollout", c6_record), "out", "progress")
    c6_train = [
        "model=tiny_qwen2_5_vl", "policy.action_dim=4", "policy.chunk=4", "policy.decoding=parallel", "data=house_nav",
        "data.cameras=[ego]", "data.action_mask=[true,true,true,false]", "data.action_normalization=spec",
        "policy=house_memory",
        "data.memory={inputs: [topdown, objects, text], map_level: easy, map_frame: ego_up, map_extent_m: 10.0, "
        "map_size: [112, 112], max_objects: 8}",
        "policy.inputs.proprio=token", "policy.inputs.memory_text_jitter=[3.0,0.1]",
        "policy.inputs.proprio_keys=[sensors/motion]", f"data.paths=[{R / 'demo'}]",
        f"data.cache_dir={R / 'memory_cache'}", "train.steps=1500", "train.batch_size=8", "train.lr=0.0005",
        "train.vision_lr_scale=1.0", "train.threads=1", "train.val_every=0", "train.loader_workers=0",
    ]  # fmt: skip
    ours = compose("train", train[1:])
    assert _without(ours, "out", "progress") == _without(compose("train", c6_train), "out", "progress")
    assert check[1:] == ["-m", "vla.experiment.replay_check", str(R / "demo" / "house_0_demo.hdf5")] + [
        str(R / "fit" / "policy"), "--memory-cache", str(R / "check_cache"), "--out", str(R / "check")
    ]  # fmt: skip


def _without(cfg: dict, *keys: str) -> dict:
    return {k: v for k, v in cfg.items() if k not in keys}


def test_the_learned_detector_is_chosen_on_val_frames_and_its_test_frames_render_only_at_test(tmp_path, monkeypatch):
    """``detector`` (RESULTS 3.10-3.12): val and train frames and the questions at record, the detector
    trained (best val F1 kept), its test frames rendered only in the test stage; then the memory agent with
    ``perception=learned`` and that checkpoint, offline and mid-episode, and the frame-only control under
    learned and every profile -- the GST commands composed as vla-gst / vla-rollout read them."""
    from vla.config import compose
    from vla.experiment import detector, gst_eval

    seen: list[list[str]] = []

    def fake(cmd, log):
        seen.append(cmd)
        if cmd[2:4] == ["vla.detector", "train"]:
            out = Path(cmd[cmd.index("--out") + 1])
            out.mkdir(parents=True)
            (out / "best.pt").write_text("")

    monkeypatch.setattr(detector, "run", fake)
    monkeypatch.setattr(gst_eval, "run", fake)
    R = tmp_path / "r"
    recipe = load("gst_learned_detector")
    assert recipe.test_set() == load("gst_memory_agent").test_set()  # the same 20 apartments' questions
    book = tmp_path / "uses.jsonl"
    for stage in ("record", "train"):
        cli.run(recipe, stage, R, ledger_path=book)
    renders = [c[c.index("--split") + 1] for c in seen if c[3:4] == ["render"]]
    assert renders == ["val", "train"]  # no test frame before the choice
    train = next(c for c in seen if c[3:4] == ["train"])
    assert train[train.index("--epochs") + 1] == "4" and train[-5:] == ["--widths", "16", "24", "40", "64"]
    seen.clear()
    cli.run(recipe, "test", R, ledger_path=book)
    assert [c[c.index("--split") + 1] for c in seen if c[3:4] == ["render"]] == ["test"]
    evals = [c[c.index("--split") + 1] for c in seen if c[3:4] == ["eval"]]
    assert evals == ["val", "test"]
    gst = [c for c in seen if Path(c[0]).name in ("vla-gst", "vla-rollout")]
    got = {}
    for c in gst:
        tool = Path(c[0]).name
        cfg = compose("gst" if tool == "vla-gst" else "rollout", c[2:] if tool == "vla-gst" else c[1:])
        p = cfg.get("perception") or {}
        key = (tool, cfg["agent"]["answer_from"], p.get("name") or "gt")
        got[key] = p.get("checkpoint")
    ck = str(R / "detector" / "best.pt")
    assert got == {
        ("vla-gst", "memory", "learned"): ck, ("vla-rollout", "memory", "learned"): ck,
        ("vla-gst", "frame", "learned"): ck, ("vla-gst", "frame", "gt"): None,
        ("vla-gst", "frame", "realistic"): None, ("vla-gst", "frame", "harsh"): None,
    }  # fmt: skip


def test_stage_select_is_everything_but_the_test(tmp_path, monkeypatch):
    """``stage=select`` records, trains and scores every checkpoint on val -- what a recipe whose test set
    has been used can still run -- and touches neither the test states nor the ledger."""
    from vla.experiment import libero

    seen: list[str] = []

    def fake(cmd, log):
        out = Path(next(x for x in cmd if x.startswith("out="))[4:])
        seen.append(f"{Path(cmd[0]).name}:{out.relative_to(tmp_path / 'r')}")
        if Path(cmd[0]).name == "vla-train":
            for step in (4, 8):
                (out / "checkpoints" / f"step_{step}").mkdir(parents=True)
        else:
            out.mkdir(parents=True, exist_ok=True)
            (out / "summary.json").write_text(json.dumps({"success_rate": 0.5, "episodes": 2}))

    monkeypatch.setattr(libero, "run", fake)
    monkeypatch.setattr("vla.experiment.common.run", fake)  # the recording
    book = tmp_path / "uses.jsonl"
    res = cli.run(load("libero_object_oft", {"steps": 8, "checkpoints": 2}), "select", tmp_path / "r", ledger_path=book)
    assert seen == [
        "vla-rollout:rec",
        "vla-train:train",
        "vla-rollout:val/step_4-chunk",
        "vla-rollout:val/step_8-chunk",
    ]
    assert res["test"] == {} and ledger.read(book) == []
