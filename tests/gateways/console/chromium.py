"""Debian's ``chromium``, headless, as the person looking at the console: one browser per test module,
driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON messages ended by a NUL
byte on file descriptors 3 and 4), so that every page of a module is seen in one browser run.

Installed with apt-get when missing, as the MQTT tests install mosquitto.
"""

from __future__ import annotations

import base64
import fcntl
import itertools
import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

import orjson

from ..mqtt.mosquitto import ensure_installed, terminate

#: the viewport pages are looked at in: a laptop's
WIDTH, HEIGHT = 1280, 900


@dataclass(frozen=True)
class Seen:
    """A page as the browser rendered it."""

    url: str
    #: the DOM after rendering, serialized
    dom: str
    #: the viewport's screenshot, PNG
    png: bytes
    #: the document's laid-out width, and the viewport's
    scroll_width: int
    viewport_width: int


class Chromium:
    def __init__(self) -> None:
        binary = ensure_installed("chromium", "chromium")
        self.profile = tempfile.TemporaryDirectory(prefix="ferrymq-chromium-", ignore_cleanup_errors=True)
        to_browser, self._in = os.pipe()
        self._out, from_browser = os.pipe()
        # above 9, so that putting them on 3 and 4 overwrites neither
        to_browser, from_browser = (_above_9(fd) for fd in (to_browser, from_browser))
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                "--hide-scrollbars", f"--user-data-dir={self.profile.name}", f"--window-size={WIDTH},{HEIGHT}"]
        # the browser reads commands on its fd 3 and writes answers on its fd 4: bash puts the pipes there
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-',
             binary, *args],
            pass_fds=(to_browser, from_browser), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._ids = itertools.count(1)
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=WIDTH, height=HEIGHT,
                  deviceScaleFactor=1, mobile=False)

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        message = {"id": msg_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._in, orjson.dumps(message) + b"\0")
        while True:
            answer = self._next()
            if answer.get("id") == msg_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
            self._events.append(answer)

    def _next(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._out, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return orjson.loads(raw)

    def _wait_event(self, method: str) -> None:
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method:
                    del self._events[i]
                    return
            self._events.append(self._next())

    def see(self, url: str) -> Seen:
        """Load ``url``, wait for it to be laid out, and take what a person would see of it."""
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self._wait_event("Page.loadEventFired")
        dom = self._evaluate("document.documentElement.outerHTML")
        widths = self._evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        png = base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"])
        return Seen(url, dom, png, *widths)

    def _evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)["result"]["value"]

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        terminate(self.proc)
        os.close(self._in)
        os.close(self._out)
        self.profile.cleanup()


def _above_9(fd: int) -> int:
    """``fd`` moved to a descriptor number above 9."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved
