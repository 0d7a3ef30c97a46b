"""Headless Chromium (Debian's package) driven over the DevTools protocol, for the live-page test.

No driver package is needed: Chromium is started with ``--remote-debugging-port=0``, the port is
read from ``DevToolsActivePort`` in its fresh profile directory, and JavaScript is evaluated in the
page over a websocket (``Runtime.evaluate``). The flags keep it from reaching for the network,
which is closed on these machines (without them it stalls).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from itertools import count
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    def __init__(self, url: str, width: int = 1280, height: int = 900, timeout: float = 60.0) -> None:
        exe = find_chromium()
        if exe is None:
            raise FileNotFoundError("no chromium on PATH")
        self.profile = Path(tempfile.mkdtemp(prefix="chromium-profile-"))
        self.log = open(self.profile.parent / (self.profile.name + ".log"), "wb")
        args = [exe, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}", url]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._ids = count(1)
        self.ws = None
        try:
            port = self._devtools_port(timeout)
            page = self._page_target(port, timeout)
            self.ws = connect(page, max_size=None, open_timeout=timeout, legacy=True)
        except BaseException:
            self.close()
            raise

    def _devtools_port(self, timeout: float) -> int:
        f = self.profile / "DevToolsActivePort"
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}: {self.log_text()[-2000:]}")
            if f.exists():
                lines = f.read_text().split()
                if lines:
                    return int(lines[0])
            time.sleep(0.1)
        raise TimeoutError(f"chromium did not open its DevTools port in {timeout:.0f} s: {self.log_text()[-2000:]}")

    def _page_target(self, port: int, timeout: float) -> str:
        deadline = time.time() + timeout
        while time.time() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = json.loads(r.read())
            pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise TimeoutError("chromium opened no page")

    def log_text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        rid = next(self._ids)
        self.ws.send(json.dumps({"id": rid, "method": method, "params": params or {}}))
        deadline = time.time() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.time())))
            if msg.get("id") == rid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def evaluate(self, expression: str) -> Any:
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"page error: {r['exceptionDetails'].get('text')}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0, interval: float = 0.2) -> Any:
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                last = self.evaluate(expression)
            except RuntimeError as exc:  # e.g. the page has not loaded yet
                last = str(exc)[:300]
            else:
                if last:
                    return last
            time.sleep(interval)
        raise TimeoutError(f"page never satisfied {expression!r} in {timeout:.0f} s (last: {last!r})")

    def screenshot(self, path: str | Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:  # noqa: BLE001 - closing anyway
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        Path(self.log.name).unlink(missing_ok=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
