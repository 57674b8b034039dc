"""Download pipeline tests against a local HTTP server: resume, verify, fail clearly."""

from __future__ import annotations

import hashlib
import http.client
import itertools
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curvekit.errors import ChecksumError, DownloadError
from curvekit.release.download import download, file_sha256, verify_file
from tests.httpserver import RunningServer, _Handler, serve, silent_server, unused_port

BODY = random.Random(2019).randbytes(3 * 2**20 + 12345)  # not a multiple of the chunk size
SHA = hashlib.sha256(BODY).hexdigest()
CHUNK = 64 * 1024


@pytest.fixture(scope="module")
def _running() -> Iterator[RunningServer]:
    with serve(BODY) as server:
        yield server


@pytest.fixture
def server(_running: RunningServer) -> RunningServer:
    """The module's server, reset to serve BODY normally with an empty request log."""
    state = _running.state
    state.body, state.mode, state.break_after, state.status = BODY, "normal", 0, 404
    state.hits.clear()
    return _running


def _no_network(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("download() must not touch the network here")


def test_full_download_reports_monotonic_progress(server: RunningServer, tmp_path: Path) -> None:
    calls: list[tuple[int, int | None]] = []
    dest = tmp_path / "sub" / "data.bin"
    out = download(
        server.url(), dest, sha256=SHA, chunk_size=CHUNK, progress=lambda d, t: calls.append((d, t))
    )
    assert out == dest
    assert dest.read_bytes() == BODY
    assert not dest.with_name("data.bin.part").exists()
    assert calls[0] == (0, len(BODY))
    assert calls[-1] == (len(BODY), len(BODY))
    assert len(calls) > 10
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(calls))
    assert {t for _, t in calls} == {len(BODY)}
    [hit] = server.state.hits
    assert hit.user_agent == "curvekit"
    assert hit.range is None


def test_broken_transfer_keeps_part_and_rerun_resumes(
    server: RunningServer, tmp_path: Path
) -> None:
    dest = tmp_path / "data.bin"
    part = tmp_path / "data.bin.part"
    kept = 1_000_003
    server.state.mode, server.state.break_after = "break", kept
    with pytest.raises(DownloadError) as info:
        download(server.url(), dest, sha256=SHA, chunk_size=CHUNK)
    message = str(info.value)
    assert not isinstance(info.value, ChecksumError)
    assert f"{kept} of {len(BODY)} bytes" in message
    assert str(part) in message and "re-run to resume" in message
    assert part.read_bytes() == BODY[:kept]
    assert not dest.exists()

    server.state.mode = "normal"
    calls: list[tuple[int, int | None]] = []
    download(
        server.url(), dest, sha256=SHA, chunk_size=CHUNK, progress=lambda d, t: calls.append((d, t))
    )
    assert dest.read_bytes() == BODY
    assert not part.exists()
    first, second = server.state.hits
    assert second.range == f"bytes={kept}-"
    assert second.status == 206
    assert (first.bytes_sent, second.bytes_sent) == (kept, len(BODY) - kept)
    assert calls[0] == (kept, len(BODY))
    assert calls[-1] == (len(BODY), len(BODY))


class _LateToCount:
    """A handler's output stream that holds the handler back after each body write, as a
    busy machine does when it deschedules the server's thread: the client has every byte,
    the server has not yet counted them."""

    LATE = 0.5

    def __init__(self, wfile: Any) -> None:
        self._wfile, self._writes = wfile, 0

    def write(self, data: bytes) -> int:
        written: int = self._wfile.write(data)
        self._writes += 1
        if self._writes > 1:  # the first write is the status line and the headers
            threading.Event().wait(self.LATE)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wfile, name)


def test_the_servers_count_is_read_once_it_has_finished_answering(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test reads how many bytes the server sent only once the server's thread has
    finished the answer, however late that thread runs: the count was read as 0 on a loaded
    machine, after the client had all the bytes."""
    setup = _Handler.setup

    def late_setup(handler: _Handler) -> None:
        setup(handler)
        handler.wfile = _LateToCount(handler.wfile)  # type: ignore[assignment]

    monkeypatch.setattr(_Handler, "setup", late_setup)
    download(server.url(), tmp_path / "data.bin", sha256=SHA, chunk_size=CHUNK)
    [hit] = server.state.hits
    assert hit.bytes_sent == len(BODY)


class _DyingResponse:
    """A 200 response whose connection fails after the first chunk."""

    status = 200

    def __init__(self, error: Exception) -> None:
        self.headers = {"Content-Length": str(len(BODY))}
        self._error = error
        self._sent = False

    def read(self, size: int) -> bytes:
        if self._sent:
            raise self._error
        self._sent = True
        return BODY[:size]

    def close(self) -> None:
        pass

    def __enter__(self) -> _DyingResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.mark.parametrize(
    "error", [ConnectionResetError("reset by peer"), http.client.IncompleteRead(b"", 10)]
)
def test_connection_failing_midway_keeps_part(tmp_path: Path, error: Exception) -> None:
    dest = tmp_path / "data.bin"
    with pytest.raises(DownloadError, match=f"after {CHUNK} of {len(BODY)} bytes") as info:
        download(
            "http://x/",
            dest,
            sha256=SHA,
            chunk_size=CHUNK,
            urlopen=lambda *a, **k: _DyingResponse(error),
        )
    assert "re-run to resume" in str(info.value)
    assert dest.with_name("data.bin.part").read_bytes() == BODY[:CHUNK]


def test_server_ignoring_range_restarts_from_zero(server: RunningServer, tmp_path: Path) -> None:
    dest = tmp_path / "data.bin"
    # Junk in the part: appending the 200 body to it would fail the checksum.
    dest.with_name("data.bin.part").write_bytes(b"junk" * 1000)
    server.state.mode = "ignore-range"
    download(server.url(), dest, sha256=SHA, chunk_size=CHUNK)
    assert dest.read_bytes() == BODY
    [hit] = server.state.hits
    assert hit.range == "bytes=4000-"
    assert hit.status == 200


def test_206_for_the_wrong_offset_restarts_without_range(
    server: RunningServer, tmp_path: Path
) -> None:
    dest = tmp_path / "data.bin"
    dest.with_name("data.bin.part").write_bytes(BODY[:5000])
    server.state.mode = "range-from-zero"
    download(server.url(), dest, sha256=SHA, chunk_size=CHUNK)
    assert dest.read_bytes() == BODY
    assert [h.range for h in server.state.hits] == ["bytes=5000-", None]


def test_complete_part_gets_416_and_is_verified_without_transfer(
    server: RunningServer, tmp_path: Path
) -> None:
    dest = tmp_path / "data.bin"
    dest.with_name("data.bin.part").write_bytes(BODY)
    download(server.url(), dest, sha256=SHA.upper(), chunk_size=CHUNK)
    assert dest.read_bytes() == BODY
    [hit] = server.state.hits
    assert (hit.status, hit.bytes_sent) == (416, 0)


def test_oversized_part_is_discarded(server: RunningServer, tmp_path: Path) -> None:
    dest = tmp_path / "data.bin"
    dest.with_name("data.bin.part").write_bytes(BODY + b"extra")
    download(server.url(), dest, sha256=SHA, chunk_size=CHUNK)
    assert dest.read_bytes() == BODY
    assert [h.status for h in server.state.hits] == [416, 200]


def test_wrong_checksum_deletes_part_and_says_expected_and_got(
    server: RunningServer, tmp_path: Path
) -> None:
    dest = tmp_path / "data.bin"
    server.state.mode = "wrong-content"
    with pytest.raises(ChecksumError) as info:
        download(server.url(), dest, sha256=SHA, chunk_size=CHUNK)
    message = str(info.value)
    got = hashlib.sha256(BODY[::-1]).hexdigest()
    assert f"expected {SHA}" in message and f"got {got}" in message
    assert server.url() in message
    assert "Re-run" in message and "--url" in message and "--sha256 HEX" in message
    assert not dest.exists()
    assert not dest.with_name("data.bin.part").exists()


def test_sha256_none_skips_verification(server: RunningServer, tmp_path: Path) -> None:
    server.state.mode = "wrong-content"
    dest = download(server.url(), tmp_path / "data.bin", sha256=None, chunk_size=CHUNK)
    assert dest.read_bytes() == BODY[::-1]


def test_malformed_sha256_fails_before_any_request(server: RunningServer, tmp_path: Path) -> None:
    with pytest.raises(ChecksumError, match="64 hexadecimal digits"):
        download(server.url(), tmp_path / "data.bin", sha256="abc123", urlopen=_no_network)


def test_server_down_names_url_and_offline_alternative(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{unused_port()}/data.bin"
    with pytest.raises(DownloadError) as info:
        download(url, tmp_path / "data.bin", sha256=SHA, timeout=2)
    assert url in str(info.value)
    assert "--archive" in str(info.value)
    assert not (tmp_path / "data.bin.part").exists()


@pytest.mark.parametrize("status", [404, 500])
def test_http_error_names_url_status_and_offline_alternative(
    server: RunningServer, tmp_path: Path, status: int
) -> None:
    server.state.mode, server.state.status = "status", status
    with pytest.raises(DownloadError) as info:
        download(server.url(), tmp_path / "data.bin", sha256=SHA)
    message = str(info.value)
    assert server.url() in message and f"HTTP {status}" in message and "--archive" in message
    assert not isinstance(info.value, ChecksumError)
    assert not (tmp_path / "data.bin.part").exists()


def test_unresponsive_server_times_out(tmp_path: Path) -> None:
    with silent_server() as port, pytest.raises(DownloadError) as info:
        download(f"http://127.0.0.1:{port}/x", tmp_path / "x", sha256=SHA, timeout=0.2)
    assert "timed out" in str(info.value) and "--archive" in str(info.value)


def test_existing_dest_with_right_hash_makes_no_network_call(tmp_path: Path) -> None:
    dest = tmp_path / "data.bin"
    dest.write_bytes(BODY)
    assert download("http://unused.invalid/", dest, sha256=SHA, urlopen=_no_network) == dest
    assert download("http://unused.invalid/", dest, sha256=None, urlopen=_no_network) == dest


def test_existing_dest_with_wrong_hash_is_replaced_only_by_verified_bytes(
    server: RunningServer, tmp_path: Path
) -> None:
    dest = tmp_path / "data.bin"
    dest.write_bytes(b"stale")
    server.state.mode = "wrong-content"
    with pytest.raises(ChecksumError):
        download(server.url(), dest, sha256=SHA)
    assert dest.read_bytes() == b"stale"  # a failed refresh keeps what was there
    server.state.mode = "normal"
    assert download(server.url(), dest, sha256=SHA).read_bytes() == BODY


def test_file_url_works_even_with_a_stale_part(tmp_path: Path) -> None:
    source = tmp_path / "mirror" / "data.bin"
    source.parent.mkdir()
    source.write_bytes(BODY)
    dest = tmp_path / "cache" / "data.bin"
    dest.parent.mkdir()
    dest.with_name("data.bin.part").write_bytes(b"junk")  # file:// ignores Range: restart
    calls: list[tuple[int, int | None]] = []
    download(
        source.as_uri(),
        dest,
        sha256=SHA,
        chunk_size=CHUNK,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert dest.read_bytes() == BODY
    assert calls[-1] == (len(BODY), len(BODY))


def test_file_sha256_and_verify_file(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(BODY)
    calls: list[tuple[int, int | None]] = []
    assert file_sha256(path, chunk_size=CHUNK, progress=lambda d, t: calls.append((d, t))) == SHA
    assert calls[-1] == (len(BODY), len(BODY))
    verify_file(path, SHA.upper())
    wrong = "0" * 64
    with pytest.raises(ChecksumError, match=f"expected {wrong}, got {SHA}.*left in place"):
        verify_file(path, wrong, delete_on_mismatch=False)
    assert path.exists()
    with pytest.raises(ChecksumError, match="was deleted"):
        verify_file(path, wrong)
    assert not path.exists()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.binary(min_size=1, max_size=5000), cut=st.integers(0, 5000), chunk=st.integers(1, 997)
)
def test_any_break_point_then_resume_yields_the_exact_file(
    server: RunningServer,
    tmp_path_factory: pytest.TempPathFactory,
    data: bytes,
    cut: int,
    chunk: int,
) -> None:
    """Wherever the connection drops, break + resume reproduces the file byte for byte."""
    server.state.body, server.state.mode, server.state.break_after = data, "break", cut
    dest = tmp_path_factory.mktemp("prop") / "d.bin"
    sha = hashlib.sha256(data).hexdigest()
    if cut < len(data):
        with pytest.raises(DownloadError, match="re-run to resume"):
            download(server.url(), dest, sha256=sha, chunk_size=chunk)
        server.state.mode = "normal"
    download(server.url(), dest, sha256=sha, chunk_size=chunk)
    assert dest.read_bytes() == data
    assert not dest.with_name("d.bin.part").exists()
