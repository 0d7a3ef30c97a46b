"""Every command of README.md and docs/*.md, checked against the code, so none can drift from it.

    .venv/bin/python scripts/check_docs_commands.py --list        # each command: run, or skip and why
    .venv/bin/python scripts/check_docs_commands.py --compose     # parse every command's arguments (seconds)
    nice -n 10 .venv/bin/python scripts/check_docs_commands.py --run   # run them at tiny size (slow; make check-docs)
    ... --run --only README.md --only docs/POLICY.md:13           # some files, or one block (a line of it)

**What a command is.** Every line of a fenced block labelled ``bash`` / ``sh`` (or unlabelled) whose
first word, after ``NAME=value`` prefixes and ``.venv/bin/``, is a program (``vla-*``, ``python``,
``torchrun``, ``make``, ``pytest``, ...) or shell (``for``, ``done``, ``export``, ``NAME="..."``);
continuation lines (``\\``) are joined and comments dropped. Diagrams and listings are not commands.
In the prose, a quoted script run (```.venv/bin/python scripts/x.py ...```) or a quoted ``vla-*``
command with an ``out=`` is a command too (a block of its own).

**Tiny size.** Overrides are appended to each command (Hydra keeps the last value of a key), by
program and env (:func:`tiny`): ``vla-rollout`` runs one task's first trial with ``env.max_steps=8``
(more when ``gst.every`` asks questions; the default when it records demonstrations, so that they
can succeed); ``vla-train`` 2 steps of batch 2; ``vla-gst generate`` 1 scene and 1 view;
``vla-data libero`` one demonstration of one task; the scripts their smallest arguments
(:data:`SCRIPT_ARGS`).

**How they run.** The blocks of one file run in order, each block as one bash script (its
variables and loops work as written), in one scratch directory per file that links the repository's
code: relative paths such as ``runs/...`` stay in it, so a block that records demonstrations, trains
on them and evaluates the checkpoint runs as the chain it documents, and nothing touches the
repository's own ``runs/``. ``vla-serve`` starts in the background on a free port (``8765`` in the
block becomes that port; ``vla-query`` finds it through ``VLA_SERVE_URL``) and stops at the block's
end. A command fails its block (later commands of the block depend on it).

**Skipped** (printed with the reason, :func:`skip_reason`): what needs what this machine cannot have
(SLURM, a Ray cluster, a GPU checkpoint or downloaded weights, conda and Isaac Sim), fragments and
templates (``...``, ``DIR``, ``FILE``), ``make test`` (the suite itself).

``--compose`` (run by tests/test_docs_commands.py in the fast tier) runs nothing of a command's work:
it parses the arguments of every command -- runnable, or skipped for what this machine lacks (SLURM,
Ray, a GPU, OmniGibson), a fragment's given ones; not templates (:func:`parsed_commands`) -- with the
command's own program's parsing (scripts/docs_flags.py): the config of each ``vla-rollout`` /
``vla-gst`` / ``vla-train`` / ``vla-serve`` / ``vla-data`` / ``vla-merge`` command composed by the
project's own compose (and ``vla-rollout``'s / ``vla-gst``'s env, perception and agent options
checked), ``vla-query``'s and each script's (``scripts/*.py``, ``python -m vla.*``) argparse
parser, as documented and with the tiny arguments appended; and it checks that whatever a command
reads (``questions=``, ``agent.checkpoint=``, ``data.paths=``, ``predictions=``, ...) an earlier
command of its file writes. So a renamed or removed option, an unknown flag, a bad choice or a
dangling path fails CI in seconds, naming the file, line and command; ``--run`` runs them for real.
On the shared 2-core machine here ``--run`` took the time printed at its end (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import itertools
import os
import json
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]
PROGRAMS = {
    "vla-rollout", "vla-train", "vla-gst", "vla-serve", "vla-query", "vla-merge", "vla-data", "vla-experiment",
    "python", "torchrun", "make", "pytest", "srun", "sbatch", "conda", "pip", "nice", "cd", "mkdir", "ln",
}  # fmt: skip
SHELL = ("for ", "done", "export ", "do ")
ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=(\"[^\"]*\"|'[^']*'|\S*)\s*")
TIMEOUT_S = 3600  # per command
SCRIPT_ARGS = {  # the smallest arguments of each documented script (appended; argparse keeps the last)
    "scripts/bench_house.py": "--gen-scenes 1 --frames 3 --scenes 1 --trials 1 --max-steps 30",
    "scripts/bench_scale.py": "--episodes 2 --steps 5 --reps 1 --gst-scenes 0",
    "scripts/bench_policy.py": "--model tiny_qwen2_5_vl --chunks 1 --batches 1 --decoders loop --warmup 0 --repeats 1",
    "scripts/bench_memory.py": "--quick --no-open3d",
    "scripts/bench_detector.py": "--frames 4",
    "scripts/bench_rollout.py": "--steps 3 --blocks 1 --resolution 64 --episodes 2 --episode-steps 5",
    "scripts/bench_localize.py": "--scenes 1 --views 2 --no-partial --no-tds",
    "scripts/bench_data.py": "--episodes 1 --size 64 --map-size 64 --reads 20 --workers 1",
    "scripts/failure_videos.py": "",
    "scripts/gst_table.py": "",
    "scripts/openpi_libero_eval.py": "--trials 1 --resolution 64",
    "scripts/perturb_sweep.py": "--trials 1 --factors robot --levels 1",
    "analyses/probe_gst_copy.py": "--steps 2 --batch 2 --eval-every 2",
}


# a named experiment at its smallest (its options overridden: a recipe of its own, never the named one's test)
EXPERIMENT_ARGS = (
    "steps=2 checkpoints=1 select=final scenes=1 val_scenes=1 test_scenes=1 train_scenes=1 demos=1 "
    "val_demos=1 val_trials=1 dagger_scenes=1 dagger_steps=4 gst_every=10 views=1 language_trials=1 perturb_trials=1 "
    "test_trials=1"
)


def experiment_args(text: str) -> str:
    """:data:`EXPERIMENT_ARGS` that the named experiment's kind reads (a recipe refuses the others)."""
    from vla.experiment.recipe import READS, load

    m = re.search(r"\bvla-experiment\s+(\w+)", text)
    try:
        recipe = load(m.group(1)) if m else None
    except ValueError:
        return EXPERIMENT_ARGS  # an unknown name: the command fails as documented, with its own message
    if recipe is None:
        return ""
    if recipe.kind == "rollouts":  # each run made tiny as a documented vla-rollout is
        runs = {k: [*v, *tiny("vla-rollout " + " ".join(v), {}).split()] for k, v in recipe.options.runs.items()}
        return "'runs=" + json.dumps(runs) + "'"
    keep = {"steps"} if recipe.options.steps == 0 else set()  # one that trains nothing (steps: 0) stays so
    return " ".join(a for a in EXPERIMENT_ARGS.split() if a.split("=")[0] in set(READS[recipe.kind]) - keep)


@dataclass
class Command:
    file: str
    line: int
    text: str  # continuation lines joined, comment dropped

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Block:
    file: str
    line: int
    commands: list[Command] = field(default_factory=list)


# ----------------------------------------------------------------------------- extraction
def _strip_comment(line: str) -> str:
    """``line`` without a trailing ``# ...`` comment (a ``#`` outside quotes, after a space)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def program(text: str) -> str:
    """The program a command line runs (after NAME=value prefixes, ``.venv/bin/``, ``nice -n N``)."""
    rest = text.strip()
    while (m := ASSIGN.match(rest)) and m.end() < len(rest):
        rest = rest[m.end() :]
    words = rest.split()
    if not words:
        return ""
    if words[0] == "nice":
        words = words[3:] if len(words) > 2 and words[1] == "-n" else words[1:]
    first = words[0].removeprefix(".venv/bin/") if words else ""
    if first == "python" and len(words) > 1:
        return words[1] if words[1].endswith(".py") else f"python {' '.join(words[1:3])}"
    return first


def is_command(text: str) -> bool:
    t = text.strip()
    if not t:
        return False
    if t.startswith(SHELL) or (ASSIGN.match(t) and ASSIGN.match(t).end() == len(t)):
        return True  # shell syntax, or a variable for the lines below
    if re.search(r"\b(sbatch|srun)\b", t):
        return True
    p = program(t)
    return bool(p) and (
        p.split()[0] in PROGRAMS or (p.startswith(("scripts/", "analyses/")) and p.endswith((".py", ".sh")))
    )


def extract(files: list[str] = DOCS) -> list[Block]:
    blocks = []
    for name in files:
        lines = (ROOT / name).read_text().splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^\s*```(\w*)\s*$", lines[i])
            if not m:
                i += 1
                continue
            lang, start = m.group(1), i + 1
            j = start
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            if lang in ("bash", "sh", "shell", ""):
                block = Block(name, start + 1)
                k = start
                while k < j:
                    text, first = lines[k], k
                    while text.rstrip().endswith("\\") and k + 1 < j:
                        k += 1
                        text = text.rstrip()[:-1].rstrip() + " " + lines[k].strip()
                    for part in _strip_comment(text).split(" ; "):  # a; b: two commands
                        if is_command(part):
                            block.commands.append(Command(name, first + 1, part.strip()))
                    k += 1
                if block.commands:
                    blocks.append(block)
            i = j + 1
        blocks += _inline(name, lines)
    return blocks


INLINE = re.compile(
    r"`((?:[A-Z_]+=\S+ )*(?:\.venv/bin/)?(?:python (?:scripts|analyses)/\S+\.py|vla-[a-z]+ [^`]*\bout=)[^`]*)`"
)


def _inline(name: str, lines: list[str]) -> list[Block]:
    """Commands quoted in the prose (``Command: `...` ``): a script run with python, or a vla-*
    command that writes an ``out=``; each is a block of its own. Fenced blocks are left out."""
    blocks, fenced = [], False
    for n, line in enumerate(lines, 1):
        if re.match(r"^\s*```", line):
            fenced = not fenced
            continue
        if not fenced:
            blocks += [Block(name, n, [Command(name, n, m.group(1).strip())]) for m in INLINE.finditer(line)]
    return blocks


# ----------------------------------------------------------------------------- what runs, at what size
def skip_reason(text: str) -> str | None:
    p = program(text)
    words = text.split()
    if "..." in text or re.search(r"(=|\s)(DIR|FILE|OUT|PATH)(\s|$)", text) or re.search(r"\||<[^>]+>", text):
        return "a fragment or template (..., DIR, FILE), not a command to run as it is"
    if p in ("srun", "sbatch") or "sbatch" in text or "$SLURM" in text:
        return "needs SLURM"
    if "ray.address=auto" in text or "--address auto" in text or "backend=ray" in text:
        return "needs a Ray cluster (tests/test_scale.py runs a local one)"
    if p in ("conda", "pip") or "omnigibson.install" in text or "-k real_omnigibson" in text:
        return "installs or needs OmniGibson / Isaac Sim (conda, Python 3.10)"
    if "env=omnigibson" in text and "fake_omnigibson" not in text:
        return "needs OmniGibson / Isaac Sim (the fake-OmniGibson commands in docs/omnigibson.md run)"
    if "/shared/" in text or "device=cuda" in text or re.search(r"model=(vst_|qwen2_5_vl_\w+_arch)", text):
        return "needs a GPU machine with the released weights or a shared checkpoint"
    if p == "torchrun" and "--nnodes" in text:
        return "needs several nodes"
    if p == "make" and "test" in words:
        return "the test suite itself (CI runs it)"
    if p == "cd":
        return "changes directory (the checker runs in its own)"
    return None


def outputs(text: str) -> list[str]:
    """The paths a command writes (``out=``, ``record=``, ``--root``, ``root=``; ``vla-experiment NAME``
    without a root: ``runs/experiments/NAME``; ``make proof``: its ``PROOF`` directory, the Makefile's
    default unless the command sets it), up to any ``$`` or ``*``."""
    found = re.findall(r"(?:\bout=|\brecord=|--root\s+|\broot=)(\S+)", text)
    experiment = re.search(r"\bvla-experiment\s+(\w+)", text)
    if experiment and not re.search(r"\broot=", text):
        found.append(f"runs/experiments/{experiment.group(1)}")
    proof = re.search(r"\bmake\s+(?:PROOF=(\S+)\s+)?proof\b", text)
    if proof:
        default = re.search(r"^PROOF\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)
        found.append(proof.group(1) or (default.group(1) if default else ""))
    return [re.split(r"[$*]", p)[0] for p in found if re.split(r"[$*]", p)[0]]


def _keys(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"(?:^|\s)\"?([\w.]+)=(\S+?)\"?(?=\s|$)", text)}


def tiny(text: str, variables: dict[str, str]) -> str:
    """The overrides that make ``text`` tiny (see the module doc), appended by :func:`rewrite`."""
    p = program(text)
    seen = text
    for name, value in variables.items():  # what $A stands for, to read the env and its options
        seen = seen.replace(f"${name}", value)
    keys = _keys(seen)
    if p == "vla-rollout":
        env = keys.get("env", "libero")
        extra = ["eval.trials_per_task=1"]
        if "eval.tasks" in keys:
            first = re.findall(r"\d+", keys["eval.tasks"])[:1] or ["0"]
            extra.append(f"eval.tasks=[{first[0]}]")
        elif env == "libero":
            extra.append("eval.tasks=[0]")
        elif "env.seed" not in keys:
            extra.append("env.num_scenes=1")
        if env != "libero":
            extra.append("env.num_trials=1")
        if "record" not in keys:
            every = int(keys.get("gst.every", 0) or 0)
            extra.append(f"env.max_steps={max(8, every + 2)}")
        return " ".join(extra)
    if p == "vla-train":
        return "train.steps=2 train.batch_size=2 train.save_every=0 train.val_every=0 train.loader_workers=0"
    if p == "vla-gst":
        sub = text.split("vla-gst", 1)[1].split()[0]
        return "scenes=1 gen.views=1" if sub == "generate" else ""
    if p == "vla-data":
        sub = text.split("vla-data", 1)[1].split()[0]
        if sub == "spatial":
            return "scenes=1 views=1 resolution=48 use_meshes=false"
        if sub == "spatial-eval":
            return "limit=2 max_new_tokens=8"
        if sub == "spatial-score":
            return ""
        return "suite=libero_goal tasks=[0] trials=1 demos_per_task=1 max_rounds=1 workers=1"
    if p == "vla-experiment":
        return experiment_args(text)
    if p in SCRIPT_ARGS:
        return SCRIPT_ARGS[p]
    return ""


def rewrite(text: str, variables: dict[str, str], scratch: Path) -> str:
    """The command as the checker runs it: tiny overrides appended, under a timeout, the server's port
    taken from $PORT, NAV_* sizes shrunk; ``make demo`` without the setup step (pip)."""
    t = text.replace("8765", "$PORT").replace("/tmp/", f"{scratch}/tmp/")
    p = program(t)
    if p == "make":
        return t.replace("make demo", "make -o .venv/.setup-done demo")
    if p == "pytest" or "NAV_SCENES" in t:
        return re.sub(
            r"NAV_SCENES=\d+ NAV_TRIALS=\d+ NAV_MAX_STEPS=\d+", "NAV_SCENES=1 NAV_TRIALS=1 NAV_MAX_STEPS=40", t
        )
    extra = tiny(t, variables)
    if p == "vla-serve":
        return f"{t} & SERVE_PID=$!; wait_port $PORT"
    if p == "vla-query":
        return f"timeout {TIMEOUT_S} {t} || [ $? -eq 1 ]"  # 1: answered "not found", as documented
    cmd = f"{t} {extra}".rstrip()
    m = ASSIGN.match(cmd)
    prefix = ""
    while m and m.end() < len(cmd):  # NAME=value prefixes stay in front of the timeout
        prefix, cmd = prefix + cmd[: m.end()], cmd[m.end() :]
        m = ASSIGN.match(cmd)
    return f"{prefix}timeout -k 10 {TIMEOUT_S} {cmd}"


def decisions(block: Block) -> list[tuple[Command, str | None]]:
    """Each command of a block with its skip reason (None: it runs); a command that reads what a
    skipped one would have written is skipped too."""
    out, missing = [], []
    for c in block.commands:
        reason = None if _is_shell(c.text) else skip_reason(c.text)
        if reason is None and not _is_shell(c.text):
            needs = [m for m in missing if m in c.text]
            if needs:
                reason = f"reads {needs[0]}, which a skipped command writes"
        if reason is not None:
            missing += outputs(c.text)
        out.append((c, reason))
    return out


def _is_shell(text: str) -> bool:
    m = ASSIGN.match(text)
    return text.startswith(SHELL) or bool(m and m.end() == len(text))


def script_of(block: Block, scratch: Path) -> tuple[str, list[tuple[Command, str]]]:
    """The bash script that runs ``block`` (markers before each command) and the skipped commands."""
    lines = [
        "set -e",
        f"export PATH={ROOT / '.venv' / 'bin'}:$PATH MUJOCO_GL=egl PYOPENGL_PLATFORM=egl",
        "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} VLA_SERVE_URL=ws://127.0.0.1:$PORT",
        "wait_port() { for _ in $(seq 600); do (echo > /dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 1; done;"
        " return 1; }",
        "SERVE_PID=; trap '[ -n \"$SERVE_PID\" ] && kill $SERVE_PID 2>/dev/null || true' EXIT",
    ]
    skipped, variables = [], {}
    for c, reason in decisions(block):
        t = c.text
        m = ASSIGN.match(t)
        if m and m.end() == len(t):  # A="..." for the lines below
            name, value = t.split("=", 1)
            variables[name] = value.strip("\"'")
            lines.append(t)
            continue
        if t.startswith(SHELL):
            lines.append(t)
            continue
        if reason:
            skipped.append((c, reason))
            lines.append(": skipped")  # keeps loops well formed
            continue
        lines.append(f"echo '@@ {c.where}' >&2")
        lines.append(rewrite(t, variables, scratch))
    return "\n".join(lines) + "\n", skipped


def scratch_dir(base: Path, name: str) -> Path:
    """A directory that links the repository's code and data but has runs/ of its own."""
    d = base / name.replace("/", "_").removesuffix(".md")
    (d / "tmp").mkdir(parents=True, exist_ok=True)
    for p in ROOT.iterdir():
        if p.name in ("runs", ".git", "outputs") or (d / p.name).exists():
            continue
        (d / p.name).symlink_to(p)
    return d


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- modes
def list_commands(blocks: list[Block]) -> int:
    for b in blocks:
        for c, reason in decisions(b):
            if _is_shell(c.text):
                continue
            print(f"{c.where}: {'SKIP (' + reason + ')' if reason else 'RUN'}: {c.text}")
    return 0


READS = re.compile(
    r"(?:questions=|agent\.checkpoint=|data\.paths=\[|predictions=|answers=|src=|policy_path=|failure_videos\.py )"
    r"([^\s\],$]+)"
)


def unwritten_reads(blocks: list[Block]) -> list[tuple[Command, str]]:
    """(command, error) for every runnable command that reads a run directory or file (questions=,
    agent.checkpoint=, data.paths=, predictions=, ...) that no earlier command of its file writes:
    as written, it cannot run."""
    failures, written = [], {}
    for b in blocks:
        w = written.setdefault(b.file, [])
        for c, reason in decisions(b):
            if reason or _is_shell(c.text):
                continue
            for r in READS.findall(c.text):
                if not any(r == x or r.startswith(x.rstrip("/") + "/") for x in w):
                    failures.append((c, f"reads {r}, which no earlier command of {b.file} writes"))
            w += outputs(c.text)
    return failures


NOT_PARSED = ("a fragment or template", "the test suite itself", "changes directory")  # skip reasons
LOOP = re.compile(r"\bfor (\w+) in ([^;]*);")


def parsed_commands(blocks: list[Block]):
    """(command, program, argv, tiny argv) of every documented command whose arguments the fast check
    parses (docs_flags.kind): the runnable ones, those skipped for what this machine lacks (SLURM,
    Ray, a GPU, OmniGibson), a fragment's given arguments (``...`` left out; not a template's: ``a|b``,
    ``<x>``, ``[k=N]``), a one-line loop's command. Variables are those of the block; a loop variable
    takes each of its values (one argv each). The tiny argv is what ``--run`` appends (runnable ones)."""
    import docs_flags

    for b in blocks:
        variables: dict[str, str] = {}
        loops: dict[str, list[str]] = {}
        for c, reason in decisions(b):
            text, runs = c.text, reason is None
            if _is_shell(text):
                m = ASSIGN.match(text)
                if m and m.end() == len(text):
                    name, value = text.split("=", 1)
                    variables[name] = _substitute(value.strip("\"'"), variables)
                loops.update({n: v.split() for n, v in LOOP.findall(text)})
                text = re.sub(r"^(\s*(do\s+)?for \w+ in [^;]*;\s*do\b)+|;\s*done\b.*$", "", text).strip()
                text = re.split(r"\s(?:\|\||&&)\s", text)[0]  # for ...; do CMD || break; done: CMD
                if not text or _is_shell(text) or not is_command(text):
                    continue
                reason, runs = skip_reason(text), False  # --run runs the loop's line as it is
            if reason and reason.startswith(NOT_PARSED[0]):
                if re.search(r"\||<[^>]+>|\s\[\w+=", text):
                    continue  # a template, not arguments
                text, reason = re.sub(r"\s\.\.\.(?=\s|$)", "", text), None
            p = program(text)
            if m := re.search(r"^torchrun\b.*?\s-m\s+(\S+)", text.strip()):
                p = f"python -m {m.group(1)}"
            if docs_flags.kind(p) is None or (reason and reason.startswith(NOT_PARSED)):
                continue
            for t in _expansions(text, variables, loops):
                extra = shlex.split(tiny(t, variables)) if runs else []
                yield c, p, docs_flags.argv_of(shlex.split(t), p), extra


def _substitute(text: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        text = re.sub(rf"\$\{{?{name}\b\}}?", lambda _: value, text)
    return text


def _expansions(text: str, variables: dict[str, str], loops: dict[str, list[str]]) -> list[str]:
    text = _substitute(text, variables)
    names = [n for n in loops if re.search(rf"\$\{{?{n}\b", text)]
    out = []
    for values in itertools.product(*(loops[n] for n in names)):
        t = text
        for n, v in zip(names, values):
            t = re.sub(rf"\$\{{?{n}\b\}}?", lambda _: v, t)
        out.append(re.sub(r"\$\{?\w+\}?", "gt", t))  # another variable ($TOKEN, ...): a word
    return out


def compose_all(blocks: list[Block]) -> list[tuple[Command, str]]:
    """(command, error) for every documented command (:func:`parsed_commands`) whose arguments its own
    program refuses (docs_flags.check: the config of a vla-* command, a script's argparse parser,
    ...), with the checker's tiny arguments of --run too, and every command that reads what no earlier
    command writes (:func:`unwritten_reads`)."""
    import docs_flags

    failures, seen = [], set()
    for c, p, argv, extra in parsed_commands(blocks):
        if (c.where, c.text) in seen:
            continue
        # as documented, and as --run runs it (its tiny arguments appended); a vla-* config is composed
        # once, with them (none of them sets a key that composing checks; ~0.1 s a compose)
        once = extra and docs_flags.kind(p) in docs_flags.COMPOSED
        err = docs_flags.check(p, argv + extra if once else argv)
        if once and err:
            err = docs_flags.check(p, argv) or f"with the checker's tiny arguments ({' '.join(extra)}): {err}"
        elif not err and extra and not once and (err := docs_flags.check(p, argv + extra)):
            err = f"with the checker's tiny arguments ({' '.join(extra)}): {err}"
        if err:
            seen.add((c.where, c.text))
            failures.append((c, err))
    return failures + unwritten_reads(blocks)


def run_all(blocks: list[Block], base: Path) -> list[tuple[Block, str]]:
    failures = []
    t_all = time.time()
    for b in blocks:
        scratch = scratch_dir(base, b.file)
        script, skipped = script_of(b, scratch)
        for c, reason in skipped:
            print(f"skip {c.where}: {reason}")
        if all(line.startswith((":", "set ", "export ", "wait_port", "SERVE_PID")) for line in script.splitlines()):
            continue
        t0 = time.time()
        env = {**os.environ, "PORT": str(free_port()), "PYTHONPATH": str(scratch)}
        r = subprocess.run(["bash", "-c", script], cwd=scratch, env=env, capture_output=True, text=True)
        marks = re.findall(r"^@@ (\S+)$", r.stderr, re.M)
        status = "ok" if r.returncode == 0 else f"FAILED at {marks[-1] if marks else b.file}"
        print(f"{status}: block {b.file}:{b.line} ({len(marks)} commands, {time.time() - t0:.0f} s)", flush=True)
        if r.returncode != 0:
            tail = "\n".join(line for line in r.stderr.splitlines() if not line.startswith("@@"))[-2500:]
            print(tail, flush=True)
            failures.append((b, tail))
    print(f"--run: {len(blocks)} blocks in {(time.time() - t_all) / 60:.1f} min, {len(failures)} failed")
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--list", action="store_true")
    mode.add_argument("--compose", action="store_true")
    mode.add_argument("--run", action="store_true")
    ap.add_argument("--only", action="append", help="only these files (README.md, docs/X.md), or FILE:LINE: one block")
    ap.add_argument("--scratch", type=Path, help="where the scratch directories go (default: a new temp dir)")
    args = ap.parse_args(argv)
    only = args.only or DOCS
    blocks = extract(sorted({o.split(":")[0] for o in only}))
    lines = {o for o in only if ":" in o}
    if lines:  # FILE:LINE picks the block that holds that line
        blocks = [b for b in blocks if any(f"{c.file}:{c.line}" in lines for c in b.commands)]
    if args.list:
        return list_commands(blocks)
    if args.compose:
        failures = compose_all(blocks)
        for c, err in failures:
            print(f"{c.where}: {err}\n    {c.text}")
        return 1 if failures else 0
    base = (args.scratch or Path(tempfile.mkdtemp(prefix="docs-commands-"))).resolve()
    print(f"scratch: {base}", flush=True)
    return 1 if run_all(blocks, base) else 0


if __name__ == "__main__":
    sys.exit(main())
