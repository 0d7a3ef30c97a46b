"""openpi's LIBERO loop against our server (kind ``openpi``): a protocol check, not a new test of a policy.

``vla-serve`` serves a checkpoint with openpi's protocol on a free loopback port; openpi's LIBERO loop
(``scripts/openpi_libero_eval.py``, a client of any openpi-protocol server) plays the task's first
``trials`` official init states against it, ``replan_steps`` actions of each chunk; the server is stopped
when the loop ends, however it ends. The loop's own output (``episodes.jsonl``, ``summary.json``) is in
``test/``, and a killed run resumes there (docs/SERVING.md, "openpi's protocol").
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from .common import BIN, run, summary
from .recipe import ROOT

CLIENT = ROOT / "scripts" / "openpi_libero_eval.py"


def openpi(a) -> dict:
    R = Path(a.root)
    out = R / "test"
    if a.stage in ("all", "test"):
        if not Path(a.policy_path).exists():
            raise SystemExit(f"policy_path {a.policy_path}: no checkpoint there (train the experiment it names first)")
        port = _free_port()
        log = R / "logs" / "serve.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        serve = [str(BIN / "vla-serve"), f"policy_path={a.policy_path}", "env=libero", "protocol=openpi"]
        with open(log, "a") as fh:
            server = subprocess.Popen([*serve, "host=127.0.0.1", f"port={port}"], stdout=fh, stderr=subprocess.STDOUT)
            try:
                _wait(server, port, log)
                client = [sys.executable, str(CLIENT), "--host", "127.0.0.1", "--port", str(port)]
                args = ["--suite", a.suite, "--task", str(a.task), "--trials", str(a.trials)]
                run([*client, *args, "--replan-steps", str(a.replan_steps), "--out", str(out)], R / "logs/test.log")
            finally:
                server.terminate()
                try:
                    server.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    server.kill()
    return {"test": summary(out) if (out / "summary.json").exists() else {}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(server: subprocess.Popen, port: int, log: Path, timeout_s: float = 600.0) -> None:
    """Until the server accepts connections (loading a checkpoint takes a while), or it has died."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if server.poll() is not None:
            raise SystemExit(f"vla-serve exited ({server.returncode}) before it listened -- see {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"vla-serve did not listen on port {port} within {timeout_s:.0f} s -- see {log}")
