"""Headless Chromium driven over its DevTools protocol on a pipe
(`--remote-debugging-pipe`: JSON messages separated by NUL bytes on file
descriptors 3 and 4), so the HTML-report layout test needs no package beyond
the standard library and the browser itself."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find() -> str | None:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """One headless browser with one page; `call` sends a command to the page."""

    def __init__(self, exe: str, workdir: Path, timeout: float = 60.0):
        self.timeout = timeout
        self._next_id = 0
        self._buf = b""
        self.events: list[dict] = []
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        self.log_path = workdir / "chromium.log"
        log = open(self.log_path, "wb")
        args = [exe, "--headless", "--remote-debugging-pipe", f"--user-data-dir={workdir / 'profile'}",
                "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--hide-scrollbars",
                "--disable-dev-shm-usage", "--disable-extensions", "--mute-audio",
                # The page is a local file this test wrote; the sandbox needs user
                # namespaces, which containers and root (CI) do not give Chromium.
                "--no-sandbox", "about:blank"]

        def onto_3_and_4():
            # In the child, before exec: the pipe ends go where
            # --remote-debugging-pipe reads and writes (fds 3 and 4), via
            # copies above 9 in case a pipe end is itself 3 or 4.
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        # close_fds=False: the default would close 3 and 4 after onto_3_and_4;
        # every other descriptor of this process is close-on-exec (PEP 446).
        self.proc = subprocess.Popen(args, close_fds=False, preexec_fn=onto_3_and_4,
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        os.close(to_browser_r)
        os.close(from_browser_w)
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.call("Page.enable", session=True)
        except Exception:
            self.close()
            raise

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError(f"no answer from Chromium within {self.timeout:g} s (log: {self.log_path})")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed its DevTools pipe (log: {self.log_path})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: bool = False) -> dict:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev["method"] == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def open(self, path: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        self.wait_event("Page.loadEventFired")

    def viewport(self, width: int, height: int = 900, media: str = "") -> None:
        """A window `width` CSS px wide; media "print" applies the page's print rules."""
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)
        self.call("Emulation.setEmulatedMedia", {"media": media}, session=True)

    def evaluate(self, expression: str):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, out: Path, width: int, media: str = "") -> Path:
        """The whole page at `width`, as tall as its content."""
        self.viewport(width, 900, media)
        height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)"))
        self.viewport(width, max(height, 100), media)
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.call("Browser.close")
                except Exception:
                    pass
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # only the browser this object started
            self.proc.wait()
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
