"""A local, in-process HTTP server for download tests: Range support and failure modes.

>>> with serve(b"hello") as server:
...     server.url("/file.bin")  # doctest: +ELLIPSIS
'http://127.0.0.1:.../file.bin'
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

from tests.patience import PATIENCE

Mode = Literal["normal", "break", "ignore-range", "wrong-content", "range-from-zero", "status",
               "trickle", "endless", "huge-length"]

ENDLESS_CAP = 256 << 20
"""Where an ``endless`` body stops after all, so a client that never hangs up fails a test
instead of filling the disk."""


@dataclass
class Hit:
    """One request the server answered.

    ``path``, ``range``, ``user_agent`` and ``status`` are known before the response goes
    out. The count of bytes sent is known only once the server has finished answering, which
    can be after the client already has every byte it asked for: :attr:`bytes_sent` waits
    for that moment (:attr:`answered`) rather than reading a count still being made.
    """

    path: str
    range: str | None
    user_agent: str | None
    status: int
    sent: int = 0
    """Bytes written so far (the handler's running count)."""
    answered: threading.Event = field(default_factory=threading.Event, repr=False,
                                      compare=False)
    """Set when the handler has written its last byte or seen the client hang up."""

    @property
    def bytes_sent(self) -> int:
        """The bytes of the whole response, once the server has finished answering."""
        if not self.answered.wait(PATIENCE):
            raise AssertionError(f"the server has not finished answering {self.path} "
                                 f"after {PATIENCE:g} s")
        return self.sent


@dataclass
class ServerState:
    """What the server serves and how; tests flip ``mode`` between calls.

    - ``normal``: 200, or 206 for ``Range: bytes=N-`` (416 when N is past the end).
    - ``break``: announces the full Content-Length, then closes after ``break_after`` bytes.
    - ``ignore-range``: always 200 with the whole body.
    - ``wrong-content``: other bytes of the same length, so the checksum fails.
    - ``range-from-zero``: answers a Range with a 206 that starts at byte 0.
    - ``status``: an empty response with HTTP ``status`` (404, 500, ...).
    - ``trickle``: the full Content-Length, then one byte every ``trickle_interval`` seconds.
    - ``endless``: no Content-Length, then ``body`` over and over until the client hangs up
      (or ``ENDLESS_CAP`` bytes).
    - ``huge-length``: like ``endless`` but announcing a Content-Length of ``2**40``.
    """

    body: bytes
    mode: Mode = "normal"
    break_after: int = 0
    status: int = 404
    trickle_interval: float = 0.02
    hits: list[Hit] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        state = self.server.state
        hit = Hit(self.path, self.headers.get("Range"), self.headers.get("User-Agent"), 200)
        state.hits.append(hit)
        try:
            self._answer(hit, state)
        finally:
            hit.answered.set()

    def _answer(self, hit: Hit, state: ServerState) -> None:
        if state.mode == "status":
            hit.status = state.status
            self.send_error(state.status)
            return
        if state.mode in ("endless", "huge-length"):
            self._endless(hit, state)
            return
        body = state.body[::-1] if state.mode == "wrong-content" else state.body
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", hit.range or "")
        if match and state.mode != "ignore-range":
            start = 0 if state.mode == "range-from-zero" else int(match[1])
            if start >= len(body):
                hit.status = 416
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            hit.status = 206
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        payload = body[start:]
        if state.mode == "break":
            payload = payload[: state.break_after]
        try:
            if state.mode == "trickle":
                for i in range(len(payload)):
                    self.wfile.write(payload[i : i + 1])
                    self.wfile.flush()
                    hit.sent += 1
                    time.sleep(state.trickle_interval)
                return
            self.wfile.write(payload)
            hit.sent = len(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up on purpose (e.g. to restart without Range)

    def _endless(self, hit: Hit, state: ServerState) -> None:
        self.send_response(200)
        if state.mode == "huge-length":
            self.send_header("Content-Length", str(2**40))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        block = (state.body or b"x") * max(1, 65536 // max(1, len(state.body)))
        try:
            while hit.sent < ENDLESS_CAP:
                self.wfile.write(block)
                hit.sent += len(block)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what a bounded download does

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep pytest output clean


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ServerState


@dataclass
class RunningServer:
    """A started server: its address and its mutable state."""

    host: str
    port: int
    state: ServerState

    def url(self, path: str = "/data.bin") -> str:
        """The http URL of ``path`` on this server."""
        return f"http://{self.host}:{self.port}{path}"


@contextmanager
def serve(body: bytes) -> Iterator[RunningServer]:
    """Serve ``body`` at every path on 127.0.0.1 (a free port) until the block ends."""
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.state = ServerState(body)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield RunningServer("127.0.0.1", httpd.server_address[1], httpd.state)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def unused_port() -> int:
    """A port on 127.0.0.1 that nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections but never answers (for timeouts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]
