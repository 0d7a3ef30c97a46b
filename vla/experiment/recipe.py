"""A named experiment: a recipe in ``configs/experiment/<name>.yaml`` (docs/experiments/README.md).

A recipe says everything a result depends on: the kind of experiment (``libero``: one LIBERO task from
scripted demonstrations; ``house``: "go to the <object>" in the apartments with and without the map;
``gst``: GST questions as visual QA with and without the map; ``replay``: one demonstration over-fitted
and replayed; ``gst_eval``: the memory agent on the GST test questions, nothing learned; ``rollouts``:
fixed agents in closed loop, each run named by its ``vla-rollout`` overrides; ``spatial``: stage 1 of
spatial tuning, the backbone on spatial-perception questions; ``openpi``: openpi's LIBERO loop against
``vla-serve`` serving a checkpoint; ``detector``: a detector trained on rendered frames, and the memory
agent answering GST with it; ``libero_mem``: the memory suite learned in three arms -- the current
frame, a memory of frames, the map; ``libero_suite``: one language-conditioned policy for a whole
suite, with a shuffled-instruction control, a language check and LIBERO-Plus's factors), its
demonstrations, arms, training budget, selection rule and val and test sets, as the fields of
:class:`Options`. The file holds only what differs from the defaults::

    # libero_object task 0 from 50 demonstrations, OpenVLA-OFT's ingredients (docs/RESULTS.md 1.2)
    kind: libero
    options: {suite: libero_object, task: 0, recipe: oft, demos: 50}

Its identity is :func:`content_hash`: the kind and every option the kind reads (:data:`READS`),
defaults included, but not how it is run (``workers``); an option the kind does not read is refused.
The test stage runs once per identity (``vla.experiment.ledger``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from vla_common.strict import from_dict

ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = ROOT / "configs" / "experiment"
STAGES = ("all", "record", "train", "select", "test", "table")
EXECUTION = ("workers",)  # how a recipe runs, not what it is: outside its identity
_TRAINED = ("steps", "lr", "select", "checkpoints", "train_embeddings")
# the options each kind reads (besides ``workers``): its identity, and the only ones a recipe may set
READS: dict[str, tuple[str, ...]] = {
    "libero": (*_TRAINED, "init_from", "suite", "task", "recipe", "demos", "val_demos", "record_first",
               "arm_init_noise", "val_first", "val_trials", "agents"),
    "house": (*_TRAINED, "arms", "init_from", "scenes", "dagger", "dagger_scenes", "dagger_steps", "house_chunk",
              "replan", "house_recipe", "house_proprio", "val_scenes", "test_scenes", "profiles"),
    "gst": (*_TRAINED, "arms", "val_scenes", "test_scenes", "train_scenes", "gst_ego_weight"),
    "replay": ("steps", "lr", "batch_size", "family", "suite", "task", "demos", "record_first"),
    "gst_eval": ("test_scenes", "profiles", "gst_every"),
    "rollouts": ("runs",),
    "openpi": ("policy_path", "suite", "task", "trials", "replan_steps"),
    "libero_mem": (*_TRAINED, "arms", "init_from", "suite", "tasks", "demos", "val_demos", "record_first",
                   "arm_init_noise", "val_first", "val_trials", "test_first", "test_trials", "history",
                   "profiles", "cameras", "demos_from"),
    "libero_suite": (*_TRAINED, "arms", "init_from", "suite", "tasks", "demos", "val_demos", "record_first",
                     "arm_init_noise", "val_first", "val_trials", "test_trials", "language_trials", "perturb_trials",
                     "demos_from", "agents"),
    "detector": ("train_scenes", "val_scenes", "test_scenes", "epochs", "profiles", "gst_every"),
    "spatial": (*_TRAINED, "train_scenes", "val_scenes", "test_scenes", "views", "spatial_tasks", "per_view"),
}  # fmt: skip
KINDS = tuple(READS)


@dataclass
class Options:
    """Every knob of an experiment, with its default. Which kind reads which is said per field."""

    # all kinds
    steps: int = 2000  # training steps (house: round 0's; replay: the over-fit's)
    lr: float = 5e-4
    batch_size: int = 16  # replay only (the proofs' kinds fix theirs: 16, GST 8)
    select: str = "val"  # val: the checkpoint chosen on val | final: the last one, fixed before any result
    checkpoints: int = 4  # checkpoints per arm (every steps/N), chosen on val
    arms: list[str] = field(default_factory=list)  # house, gst: the arms run (default: memory and no_memory)
    train_embeddings: bool = False  # the whole embedding matrix trains, not only the action rows
    # libero, house, libero_mem, libero_suite: the starting weights: a checkpoint's path, or experiment:NAME[/ARM]
    init_from: str | None = None  # (that experiment's chosen checkpoint of ARM; default: the same arm)
    workers: int = 1  # rollout worker processes (execution only)
    # house
    scenes: int = 80  # train apartments recorded (2 episodes each)
    dagger: int = 1  # DAgger rounds after behaviour cloning
    dagger_scenes: int = 40  # train apartments rolled out per round
    dagger_steps: int = 1000  # training steps of each DAgger round
    house_chunk: int = 4  # actions per prediction (parallel decoding)
    replan: int = 0  # the learned arms' agent.replan in val and test (0: each chunk to its end)
    house_recipe: str = "bins"  # bins | plain | routes | routes_token (vla/experiment/house.py)
    house_proprio: str | None = None  # motion | none (default: the recipe's)
    val_scenes: int = 10  # house, gst: val apartments
    test_scenes: int = 20  # house, gst: test apartments
    # gst, gst_eval
    train_scenes: int = 40  # train apartments of the question set
    # gst_eval, house, libero_mem: the test's perception profiles
    profiles: list[str] = field(default_factory=lambda: ["gt"])
    gst_every: int = 30  # gst_eval: mid-episode questions every N steps (0: offline only)
    # detector (train_scenes, val_scenes, test_scenes: apartments rendered; profiles, gst_every too)
    epochs: int = 4  # the detector's training epochs (best val F1 kept)
    # spatial (val_scenes, test_scenes, train_scenes too)
    views: int = 6  # rendered views per apartment
    spatial_tasks: list[str] = field(default_factory=list)  # the task types asked (empty: all)
    per_view: int = 1  # questions of each task type per view
    # rollouts
    runs: dict[str, list[str]] = field(default_factory=dict)  # name -> vla-rollout overrides (env, agent, trials)
    gst_ego_weight: float = 0.0  # the four egocentric subtasks sampled this many times as often (0: the set alone)
    # libero, replay
    family: str = "libero"  # replay: libero (suite, task) | house (train apartment house_0)
    suite: str = "libero_object"
    task: int = 0
    recipe: str = "oft"  # oft | openvla: the policy's inputs and decoding (vla/experiment/libero.py)
    demos: int = 50  # training demonstrations (sampled init states; replay: 1)
    val_demos: int = 6  # demonstrations held out for the val loss
    record_first: int = 0  # first sampled init state recorded
    arm_init_noise: float = 0.0  # env.arm_init_noise of the recorded and val states
    val_first: int = 1000  # first sampled init state of the val rollouts
    val_trials: int = 10  # val rollouts per checkpoint and setting
    agents: list[str] = field(default_factory=list)  # NAME=k=v,...: closed-loop settings compared on val
    # libero_mem (suite, demos, val_demos, record_first, arm_init_noise, val_first, val_trials too)
    tasks: list[int] = field(default_factory=lambda: [2, 3])  # the suite's tasks (twins: 2k, 2k+1)
    test_first: int = 2000  # first sampled init state of the test rollouts
    test_trials: int = 50  # test rollouts per task
    history: int = 4  # the frames arm's earlier frames (policy.inputs.history)
    demos_from: str | None = None  # libero_mem, libero_suite: another experiment whose recording this one trains on
    # the policy's cameras (the frames and the map: from the first); recorded: always both
    cameras: list[str] = field(default_factory=lambda: ["agentview", "wrist"])
    # libero_suite (suite, tasks, demos, val_demos, record_first, arm_init_noise, val_first, val_trials too)
    language_trials: int = 10  # official states per scene of the language check (env.instruction=distractor)
    perturb_trials: int = 5  # official states per task under each LIBERO-Plus factor and level
    # openpi (suite, task too)
    policy_path: str | None = None  # the checkpoint served (another experiment's)
    trials: int = 50  # official init states played (the first N)
    replan_steps: int = 5  # actions played of each chunk (openpi: 5)

    def __post_init__(self) -> None:
        if self.select not in ("val", "final"):
            raise ValueError(f"select must be 'val' or 'final', got {self.select!r}")
        for name in ("checkpoints", "workers", "epochs"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if int(self.steps) < 0:
            raise ValueError(f"steps must be >= 0 (0: libero_suite's evaluation of init_from), got {self.steps}")
        if self.gst_ego_weight < 0:
            raise ValueError(f"gst_ego_weight must be >= 0, got {self.gst_ego_weight}")
        self.arms, self.agents, self.profiles = list(self.arms), list(self.agents), list(self.profiles)
        self.cameras = list(self.cameras)
        if not self.cameras or any(c not in ("agentview", "wrist") for c in self.cameras):
            raise ValueError(f"cameras must be some of [agentview, wrist], got {self.cameras}")
        self.tasks = [int(t) for t in self.tasks]
        self.spatial_tasks = list(self.spatial_tasks)
        if not isinstance(self.runs, dict) or not all(isinstance(v, (list, tuple)) for v in self.runs.values()):
            raise ValueError("runs must map a run's name to its list of vla-rollout overrides")
        self.runs = {str(k): [str(x) for x in v] for k, v in self.runs.items()}
        bad = [k for k, v in self.runs.items() if any(x.split("=")[0] in ("out", "eval.workers") for x in v)]
        if bad:
            raise ValueError(f"runs {bad}: out= and eval.workers= are the runner's (root=, workers=)")
        if self.trials < 1 or self.replan_steps < 1:
            raise ValueError(f"trials and replan_steps must be >= 1, got {self.trials} and {self.replan_steps}")
        if self.gst_every < 0:
            raise ValueError(f"gst_every must be >= 0, got {self.gst_every}")


@dataclass(frozen=True)
class Recipe:
    name: str
    kind: str
    options: Options
    summary: str = ""  # one line: what result it makes, where it is quoted

    def identity(self) -> dict[str, Any]:
        opts = {k: v for k, v in asdict(self.options).items() if k in READS[self.kind]}
        return {"kind": self.kind, "options": opts}

    def test_set(self) -> str:
        """The test set the recipe's test stage uses: several recipes share one (docs/RESULTS.md counts a
        test set's uses across all of them)."""
        o = self.options
        if self.kind in ("libero", "replay", "openpi"):  # openpi: the first `trials` of the official states
            if self.kind == "replay" and o.family == "house":  # its own training episode
                return f"house/train/house_0/trial{o.record_first}"
            where = "sampled" + str(o.record_first) if self.kind == "replay" else "official"  # replay: its demo
            return f"libero/{o.suite}/task{o.task}/{where}"
        if self.kind == "spatial":  # the spatial questions of the first N test apartments
            return f"spatial/test/{o.test_scenes}"
        if self.kind == "libero_mem":  # sampled states test_first.. of the tasks
            tasks = ",".join(str(t) for t in o.tasks)
            return f"libero/{o.suite}/tasks{tasks}/sampled{o.test_first}+{o.test_trials}"
        if self.kind == "libero_suite":  # the tasks' official states (the language check and factors: the first N)
            tasks = ",".join(str(t) for t in o.tasks)
            return f"libero/{o.suite}/tasks{tasks}/official"
        if self.kind == "rollouts":  # each run's env, trials and init states: the recipe is its own set
            return f"rollouts/{self.name}"
        kind = "gst" if self.kind in ("gst_eval", "detector") else self.kind  # the same question set
        return f"{kind}/test/{o.test_scenes}"  # the first N test apartments (house: stop protocol)

    def content_hash(self) -> str:
        text = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def names() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def load(name: str, overrides: dict[str, Any] | None = None, directory: Path = RECIPES_DIR) -> Recipe:
    """The recipe ``name``, with ``overrides`` of its options (a different recipe unless they are
    execution settings: its hash changes)."""
    path = Path(directory) / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"no experiment {name!r}; the named ones: {names()} ({RECIPES_DIR})")
    raw = yaml.safe_load(path.read_text()) or {}
    unknown = sorted(set(raw) - {"kind", "options", "summary"})
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; a recipe has kind, summary and options")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{path}: kind must be one of {KINDS}, got {kind!r}")
    opts = {**(raw.get("options") or {}), **(overrides or {})}
    # an option of another kind is refused here; a key that is no option at all, by from_dict below
    unread = sorted(k for k in opts if k in option_names() and k not in (*READS[kind], *EXECUTION))
    if unread:
        raise ValueError(
            f"experiment {name!r}: a {kind} experiment does not read {unread}; it reads {list(READS[kind])}"
        )
    recipe = Recipe(name, kind, from_dict(Options, opts, f"experiment {name!r}"), str(raw.get("summary", "")))
    check(recipe)
    return recipe


def check(recipe: Recipe) -> None:
    """What an option's value must be for the recipe's kind (the kinds' own tables)."""
    from .house import ARMS, PROPRIO
    from .house import RECIPES as HOUSE_RECIPES
    from .libero import RECIPES as LIBERO_RECIPES

    o = recipe.options
    if recipe.kind == "libero_mem":
        from .libero_mem import arms

        unknown = sorted(set(o.arms) - set(arms(o.history)))
        if unknown or not o.tasks or o.history < 1:
            raise ValueError(
                f"experiment {recipe.name!r}: arms must be among {sorted(arms(1))} (got unknown {unknown}), "
                f"tasks non-empty (got {o.tasks}) and history >= 1 (got {o.history})"
            )
        first = sorted(
            [(o.record_first, o.demos + o.val_demos), (o.val_first, o.val_trials), (o.test_first, o.test_trials)]
        )
        if any(a + n > b for (a, n), (b, _) in zip(first, first[1:])):
            raise ValueError(f"experiment {recipe.name!r}: the record, val and test trial ranges overlap: {first}")
    if recipe.kind == "libero_suite":
        from .libero_suite import ARMS as SUITE_ARMS

        unknown = sorted(set(o.arms) - set(SUITE_ARMS))
        if unknown or not o.tasks:
            raise ValueError(
                f"experiment {recipe.name!r}: arms must be among {sorted(SUITE_ARMS)} (got unknown {unknown}) "
                f"and tasks non-empty (got {o.tasks})"
            )
        if o.record_first < o.val_first + o.val_trials and o.val_first < o.record_first + o.demos + o.val_demos:
            raise ValueError(f"experiment {recipe.name!r}: the recorded and val sampled states overlap")
        if not all(1 <= n <= 50 for n in (o.test_trials, o.language_trials, o.perturb_trials)):
            raise ValueError("test_trials, language_trials and perturb_trials count official states: 1 to 50")
    if o.steps == 0 and (recipe.kind != "libero_suite" or not o.init_from):
        raise ValueError(
            f"experiment {recipe.name!r}: steps: 0 (nothing trained) is for a libero_suite experiment evaluating "
            f"init_from's checkpoint; this one ({recipe.kind}, init_from={o.init_from}) trains: steps >= 1"
        )
    if recipe.kind == "libero_suite" and o.agents and o.steps:
        raise ValueError(
            f"experiment {recipe.name!r}: agents are compared on one checkpoint: set steps: 0 and init_from "
            f"(a trained suite's checkpoints are compared with each chunk played to its end)"
        )
    bad = [x for x in o.agents if not re.fullmatch(r"[A-Za-z0-9_.]+=([A-Za-z_]+=[^,=]+(,[A-Za-z_]+=[^,=]+)*)?", x)]
    if bad or len({x.partition("=")[0] for x in o.agents}) < len(o.agents):
        raise ValueError(f"agents: each NAME=k=v,k=v with distinct names (e.g. replan4=replan=4), got {o.agents}")
    if "checkpoints" in READS[recipe.kind] and o.steps % o.checkpoints:  # saved every steps/checkpoints
        raise ValueError(f"steps ({o.steps}) must be a multiple of checkpoints ({o.checkpoints})")
    unknown = sorted(set(o.arms) - set(ARMS))
    if unknown and recipe.kind in ("house", "gst"):
        raise ValueError(
            f"experiment {recipe.name!r}: unknown arm(s) {unknown}; a {recipe.kind} experiment has {sorted(ARMS)}"
        )
    if o.recipe not in LIBERO_RECIPES:
        raise ValueError(f"recipe must be one of {sorted(LIBERO_RECIPES)}, got {o.recipe!r}")
    if o.house_recipe not in HOUSE_RECIPES:
        raise ValueError(f"house_recipe must be one of {sorted(HOUSE_RECIPES)}, got {o.house_recipe!r}")
    from spatial_memory.profiles import PROFILES

    allowed = sorted(set(PROFILES) - {"learned"})  # learned needs its detector's checkpoint: not in a recipe yet
    bad = sorted(set(o.profiles) - set(allowed))
    if bad:
        raise ValueError(f"profiles: unknown perception profile(s) {bad}; choose from {allowed}")
    if o.spatial_tasks:
        from vla.questions.perception.tasks import check_tasks

        check_tasks(o.spatial_tasks)
    if o.views < 1 or o.per_view < 1:
        raise ValueError(f"views and per_view must be >= 1, got {o.views} and {o.per_view}")
    if o.family not in ("libero", "house"):
        raise ValueError(f"family must be 'libero' or 'house', got {o.family!r}")
    if recipe.kind == "openpi" and not o.policy_path:
        raise ValueError(f"experiment {recipe.name!r}: an openpi experiment serves a checkpoint: set policy_path")
    if o.house_proprio is not None and o.house_proprio not in PROPRIO:
        raise ValueError(f"house_proprio must be one of {sorted(PROPRIO)} or null, got {o.house_proprio!r}")


def option_names() -> list[str]:
    return [f.name for f in fields(Options)]
