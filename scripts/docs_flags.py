"""A documented command's arguments, checked by its own program's parsing without running its work
(scripts/check_docs_commands.py ``--compose``, the fast tier of tests/test_docs_commands.py).

:func:`check` answers ``None`` (the program accepts the arguments) or the error the program would print:

* ``vla-rollout`` / ``vla-gst`` / ``vla-train`` / ``vla-serve`` / ``vla-data spatial|libero`` /
  ``vla-merge``: the config composed with the project's own compose (an unknown key or group option,
  a bad override); ``vla-rollout`` and ``vla-gst`` also :func:`vla.config.check_config` (the
  env's options such as ``env.perturb``, the perception profile); ``vla-data`` all through
  :func:`vla.data.cli.options` (its ``key=value`` commands' keys and choices too), ``vla-merge``
  through :func:`vla.cli.merge.options`; a ``--flag`` a CLI does not take is refused;
* ``vla-query``: :func:`vla.serve.cli.query_args` (its argparse parser and usage rules);
* ``vla-experiment``: :func:`vla.experiment.cli.options` (the named recipe loaded, its option overrides
  and stage checked);
* ``scripts/X.py``, ``analyses/X.py`` and ``python -m vla.X``: the script's own argparse parser. A script that checks
  more than argparse does (choices in a comma list, ``key=value`` arguments) defines
  ``parse_args(argv)`` -- what its ``main`` parses and checks before any work -- and that is called;
  otherwise its ``main(argv)`` runs until its first ``ArgumentParser.parse_args`` returns, and stops
  there. ``python -m vla.train.ray_launch ... -- OVERRIDES`` composes the overrides as ``vla-train``.

Loading a script runs its module code (imports; a benchmark pins its thread pools): the environment
variables and the CPU affinity are restored after it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import io
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Callable
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
COMPOSED = {"vla-rollout": "rollout", "vla-gst": "gst", "vla-train": "train", "vla-serve": "serve"}
CLI_MODULES = {  # python -m X (torchrun -m X): the console script X is
    "vla.cli.rollout": "vla-rollout", "vla.gst.cli": "vla-gst", "vla.train.cli": "vla-train",
    "vla.serve.cli": "vla-serve", "vla.data.cli": "vla-data", "vla.cli.merge": "vla-merge",
    "vla.experiment.cli": "vla-experiment",
}  # fmt: skip
FLAGS = {"vla-rollout": {"--cfg"}, "vla-train": {"--cfg"}, "vla-serve": {"--cfg"}}  # besides overrides, -h
GST_COMMANDS = ("generate", "eval", "score", "export")
_SCRIPTS: dict[str, object] = {}


def kind(program: str) -> str | None:
    """What :func:`check` checks of a program (``vla-rollout``, ..., ``script``, ``python -m``); None: nothing."""
    if program in COMPOSED or program in ("vla-data", "vla-query", "vla-merge", "vla-experiment"):
        return program
    if program.startswith(("scripts/", "analyses/")) and program.endswith(".py"):
        return "script"
    if program.startswith("python -m vla."):
        return "python -m"
    return None


def argv_of(words: list[str], program: str) -> list[str]:
    """The arguments after the program in a command's words, up to a redirection or another command."""
    if program.startswith("python -m "):
        module = program.split()[2]
        i = next(i for i in range(len(words) - 1) if words[i] == "-m" and words[i + 1] == module) + 1
    else:
        i = next(i for i, w in enumerate(words) if w == program or w.endswith("/" + program.split("/")[-1]))
    out = []
    for w in words[i + 1 :]:
        if w in ("&", "&&", "||", ";", "|") or w.startswith((">", "2>", "&>", "<")):
            break
        out.append(w)
    return out


def check(program: str, argv: list[str]) -> str | None:
    """None when ``program`` accepts ``argv``, else its error (one line); nothing of its work runs."""
    k = kind(program)
    try:
        if k in COMPOSED:
            return _composed(program, argv)
        if k == "vla-data":
            from vla.data.cli import options

            return _outcome(lambda: options(argv))
        if k == "vla-merge":
            from vla.cli.merge import options

            return _outcome(lambda: options(argv))
        if k == "vla-experiment":
            from vla.experiment.cli import options

            return _outcome(lambda: options(argv))
        if k == "vla-query":
            from vla.serve.cli import query_args

            return _outcome(lambda: query_args(argv))
        if k == "script":
            return _script(program, argv)
        if k == "python -m":
            module = program.split()[2]
            if module in CLI_MODULES:  # never run: checked as its console script
                if module == "vla.serve.cli" and argv[:1] == ["query"]:
                    return check("vla-query", argv[1:])
                return check(CLI_MODULES[module], argv)
            return _module(module, argv)
    except Exception as exc:  # a script that cannot be loaded, a parser that crashes: the check fails
        return f"{type(exc).__name__}: {exc}"
    return None


def _composed(program: str, argv: list[str]) -> str | None:
    from vla.config import compose

    if program == "vla-gst":
        if not argv or argv[0] not in GST_COMMANDS:
            return f"vla-gst needs a command first ({', '.join(GST_COMMANDS)}), got {argv[:1]}"
        argv = argv[1:]
    flags = FLAGS.get(program, set()) | {"-h", "--help"}
    bad = [w for w in argv if "=" not in w and not w.startswith("~") and w not in flags]
    if bad:
        return f"unknown argument(s) {bad}: {program} takes key=value overrides" + (
            f" and {', '.join(sorted(FLAGS[program]))}" if program in FLAGS else ""
        )

    def composed() -> None:
        cfg = compose(COMPOSED[program], [w for w in argv if w not in flags])
        if program in ("vla-rollout", "vla-gst"):
            from vla.config import check_config

            check_config(cfg)

    return _outcome(composed)


def _outcome(call: Callable[[], object]) -> str | None:
    """None if ``call`` returns (or stops after parsing), else the error it raises or prints on its way out."""
    err = io.StringIO()
    try:
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            call()
    except _Parsed:
        return None
    except SystemExit as exc:
        if exc.code in (0, None):
            return None
        if isinstance(exc.code, str):
            return exc.code
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit status {exc.code}"
    except ValueError as exc:
        return str(exc)
    return None


class _Parsed(Exception):
    """Raised once a script's ``main`` has parsed its arguments: the check stops before the work."""


def _until_parsed(main: Callable, argv: list[str], name: str) -> None:
    if ".parse_args(" not in inspect.getsource(main):  # it would run its work: refuse
        raise ValueError(f"{name}: main() calls no parse_args(); define parse_args(argv) for the docs check")
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise _Parsed

    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_then_stop):
        if inspect.signature(main).parameters:
            main(argv)
        else:
            with mock.patch.object(sys, "argv", [sys.argv[0], *argv]):
                main()
    raise ValueError(f"{name}: main() returned without parsing its arguments with argparse (nothing checked)")


def _script(program: str, argv: list[str]) -> str | None:
    mod = _load(ROOT / program)
    with mock.patch.object(sys, "argv", [program, *argv]):  # argparse's prog: the script's name
        if hasattr(mod, "parse_args"):
            return _outcome(lambda: mod.parse_args(argv))
        return _outcome(lambda: _until_parsed(mod.main, argv, program))


def _module(module: str, argv: list[str]) -> str | None:
    ours, rest = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, None)
    spec = importlib.util.find_spec(module)
    name = f"{module}.__main__" if spec is not None and spec.submodule_search_locations else module
    mod = _restoring(lambda: importlib.import_module(name))
    error = _outcome(lambda: _until_parsed(mod.main, argv if rest is None else ours + ["--"], f"python -m {module}"))
    if error is None and rest is not None and module == "vla.train.ray_launch":
        return _composed("vla-train", rest)
    return error


def _load(path: Path):
    """A script as a module (once), its siblings importable as running it makes them."""
    if str(path) not in _SCRIPTS:
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(f"_docs_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        _restoring(lambda: spec.loader.exec_module(mod))
        _SCRIPTS[str(path)] = mod
    return _SCRIPTS[str(path)]


def _restoring(call: Callable):
    """``call()`` with the environment variables and the CPU affinity it changes put back."""
    env = dict(os.environ)
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        return call()
    finally:
        os.environ.clear()
        os.environ.update(env)
        if cpus is not None:
            os.sched_setaffinity(0, cpus)
