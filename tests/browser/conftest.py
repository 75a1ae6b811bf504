"""Headless chromium driven over the DevTools protocol, for report page tests.

Chromium's ``--remote-debugging-pipe`` speaks CDP as NUL-separated JSON over
fds 3 (commands in) and 4 (events/results out), which needs no websocket
library.  Every read has a deadline, and the browser is killed by the pid we
started, never by name.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))  # report_fixtures

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-pipe",
    "--window-size=1280,900",
)


class CdpError(RuntimeError):
    pass


class Browser:
    """One chromium process and one attached page session."""

    def __init__(self, timeout: float = 30.0) -> None:
        if not os.path.exists(CHROMIUM):
            pytest.fail(
                f"{CHROMIUM} not found: install Debian's chromium package "
                "(apt-get install chromium) to run the browser tests"
            )
        self.timeout = timeout
        self.user_dir = tempfile.mkdtemp(prefix="kc-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_fds() -> None:  # runs in the child: CDP pipes on fds 3 and 4
            # park both above 4 first so neither dup2 clobbers the other
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.user_dir}", "about:blank"],
            # preexec_fn runs before close_fds, so 3 and 4 must be kept explicitly
            pass_fds=(3, 4, to_child_r, from_child_w),
            preexec_fn=wire_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def send(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise CdpError("chromium closed the DevTools pipe")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def wait_event(self, method: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e.get("method") == method:
                    self.events.remove(e)
                    return e
            self.events.append(self._read(deadline))

    def open_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send(
            "Target.attachToTarget",
            {"targetId": target["targetId"], "flatten": True},
            session=False,
        )
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", self.timeout)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise CdpError(f"evaluate failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def evaluate_point(self, selector: str) -> dict[str, float]:
        """Viewport centre of the element, for real mouse clicks (work without page JS)."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()"
        )
        return {"x": box["x"], "y": box["y"]}

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        errors = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                errors.append(f"console.error: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                errors.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url')}")
        return errors

    def screenshot(self, path: Path) -> None:
        height = self.evaluate("document.documentElement.scrollHeight")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {
                "width": 1280,
                "height": min(int(height), 6000),
                "deviceScaleFactor": 1,
                "mobile": False,
            },
        )
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.poll() is None:
            # the session we started holds chromium's helpers too; signal our group only
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        shutil.rmtree(self.user_dir, ignore_errors=True)


@pytest.fixture
def browser() -> Iterator[Browser]:
    b = Browser()
    try:
        b.open_page()
        yield b
    finally:
        b.close()
