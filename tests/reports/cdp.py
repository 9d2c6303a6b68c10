"""A tiny Chrome DevTools Protocol client over --remote-debugging-pipe (stdlib only).

Why: the browser test must prove that charts rendered, that nothing was logged as an error and
that no request left the page; CDP events give all three without a new dependency. Chromium
reads commands from fd 3 and writes replies and events to fd 4, NUL-separated JSON.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--remote-debugging-pipe",
]


class Browser:
    """A headless Chromium driven over the debugging pipe."""

    def __init__(self, user_data_dir: Path) -> None:
        to_child_r, self._to_child_w = os.pipe()
        self._from_child_r, from_child_w = os.pipe()

        def wire() -> None:  # runs in the child: the pipe must be fds 3 and 4
            # Copy both ends above 4 first (either may already be fd 3 or 4), then dup2 them
            # into place; dup2 makes 3 and 4 inheritable across exec.
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            while a <= 4 or b <= 4:
                a, b = os.dup(a), os.dup(b)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            close_fds=False,  # the pipe fds are O_CLOEXEC; only the dup2 copies 3/4 survive exec
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        """Stop the browser (only the process this object started)."""
        with contextlib.suppress(Exception):
            self.send("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child_w)
        os.close(self._from_child_r)

    def _read(self, timeout: float) -> dict[str, Any] | None:
        """One message, or None on timeout."""
        end = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._from_child_r], [], [], left)
            if not ready:
                return None
            chunk = os.read(self._from_child_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the debugging pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return dict(json.loads(msg))

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30,
    ) -> dict[str, Any]:
        """Send a command and wait for its result; events that arrive meanwhile are kept."""
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child_w, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while True:
            reply = self._read(max(0.0, end - time.monotonic()))
            if reply is None:
                raise TimeoutError(method)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def pump(self, seconds: float) -> None:
        """Collect events for a while."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ev = self._read(end - time.monotonic())
            if ev is not None:
                self.events.append(ev)

    def open_page(self, url: str) -> str:
        """Open a new tab with network, console and log events on; return its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Network", "Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        return str(session)

    def evaluate(self, session: str, expression: str) -> Any:
        """Evaluate a JS expression in the page and return its JSON value."""
        res = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session
        )
        return res.get("result", {}).get("value")

    def screenshot(self, session: str, dest: Path) -> Path:
        """Save a full-page PNG screenshot."""
        res = self.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True},
            session=session,
        )
        dest.write_bytes(base64.b64decode(res["data"]))
        return dest
