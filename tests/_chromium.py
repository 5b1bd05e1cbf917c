"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

No Python dependency: Chromium reads JSON commands (each ended by a NUL byte) from file
descriptor 3 and writes responses and events to descriptor 4. The tests use it to open a
page, collect every JavaScript error (uncaught exceptions, ``console.error``, the
browser's own error log), list every request the page makes, evaluate expressions in it
and take screenshots.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from typing import Any

#: Launch flags that work on this machine (root, no GPU, no display); the user data dir is fresh.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio",
         # WebGL (plotly's 3-D scenes, TensorBoard's mesh) on the CPU: SwiftShader
         "--use-angle=swiftshader", "--enable-unsafe-swiftshader")


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class ChromiumError(RuntimeError):
    pass


class Chromium:
    """One headless browser with one page; use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 1000, *, extra_flags: tuple[str, ...] = ()) -> None:
        exe = chromium_path()
        if exe is None:
            raise ChromiumError("no chromium on PATH (apt-get install -y chromium)")
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self._log = open(os.path.join(self.profile, "stderr.log"), "w+b")  # a file: a full pipe would block it
        cmd_r, self._cmd_w = os.pipe()
        self._resp_r, resp_w = os.pipe()

        def child() -> None:  # fds 3 and 4 in the browser: first move both out of the way, then place them
            high_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(resp_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, *extra_flags, f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            preexec_fn=child, pass_fds=(3, 4), close_fds=True)
        os.close(cmd_r)
        os.close(resp_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None
        self._attach()

    # ------------------------------------------------------------------ protocol
    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._resp_r], [], [], left)[0]:
                raise ChromiumError(f"no answer from chromium within {timeout} s")
            chunk = os.read(self._resp_r, 1 << 20)
            if not chunk:
                raise ChromiumError(f"chromium closed its pipe: {self._stderr()}")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict[str, Any] | None = None, *, timeout: float = 60,
             browser: bool = False) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if self.session and not browser:
            msg["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            got = self._read(timeout)
            if got.get("id") == self._id:
                if "error" in got:
                    raise ChromiumError(f"{method}: {got['error']}")
                return got.get("result", {})
            self.events.append(got)

    def pump(self, seconds: float) -> None:
        """Collect the events that arrive within ``seconds``."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                self.events.append(self._read(left))
            except ChromiumError as exc:
                if "no answer" in str(exc):
                    return
                raise

    def _attach(self) -> None:
        targets = self.send("Target.getTargets", browser=True)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True},
                                 browser=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    # ------------------------------------------------------------------ page
    def offline(self) -> None:
        """The page's network off: every request other than file:, data: and blob: fails."""
        self.send("Network.emulateNetworkConditions",
                  {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0})

    def open(self, url: str, timeout: float = 60) -> None:
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise ChromiumError(f"{url} did not finish loading in {timeout} s")
            self.pump(0.2)

    def evaluate(self, expression: str, timeout: float = 60) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_until(self, expression: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise ChromiumError(f"{expression!r} still false after {timeout} s")
            self.pump(0.25)

    def screenshot(self, selector: str | None = None) -> bytes:
        """A PNG of the viewport, or of the element ``selector`` (scrolled into view first)."""
        if selector is None:
            return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])
        return self.screenshot_of(f"document.querySelector({json.dumps(selector)})")

    def screenshot_of(self, element: str) -> bytes:
        """A PNG of the element a JavaScript expression returns (one in a shadow root too)."""
        box = self.evaluate(f"(() => {{ const e = {element}; e.scrollIntoView({{block: 'start'}}); "
                            "const r = e.getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, "
                            "r.height]; })()")
        self.pump(0.3)
        clip = {"x": box[0], "y": box[1], "width": box[2], "height": box[3], "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png", "clip": clip})["data"])

    def errors(self) -> list[str]:
        """Every JavaScript error so far: uncaught exceptions, console.error, the browser's error log."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(f"log: {p['entry']['text']} ({p['entry'].get('url', '')})")
        return out

    def console(self) -> list[str]:
        return [" ".join(str(a.get("value", a.get("description"))) for a in e["params"]["args"])
                for e in self.events if e.get("method") == "Runtime.consoleAPICalled"]

    def requests(self) -> list[str]:
        """The URL of every request the page made."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    # ------------------------------------------------------------------ life cycle
    def _stderr(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-2000:]

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", browser=True, timeout=10)
                except (ChromiumError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._cmd_w, self._resp_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
