"""Every download ends: trickling and endless servers, a full disk, a folder we cannot write."""

from __future__ import annotations

import errno
import hashlib
import json
import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from click.testing import CliRunner

from curvekit.cli import main
from curvekit.errors import ChecksumError, DownloadError
from curvekit.release import download as download_module
from curvekit.release.download import RESUME_HINT, download, size_bound
from curvekit.release.synthetic import tiny_archive
from curvekit.store.fetch import fetch
from tests.httpserver import ENDLESS_CAP, RunningServer, serve
from tests.patience import PATIENCE

BODY = random.Random(7).randbytes(300_000)
SHA = hashlib.sha256(BODY).hexdigest()
CHUNK = 16 * 1024


@pytest.fixture(scope="module")
def _running() -> Iterator[RunningServer]:
    with serve(BODY) as server:
        yield server


@pytest.fixture
def server(_running: RunningServer) -> RunningServer:
    state = _running.state
    state.body, state.mode, state.trickle_interval = BODY, "normal", 0.02
    state.hits.clear()
    return _running


# -- trickling servers ---------------------------------------------------------------------


def test_trickling_server_stops_within_the_window_and_resumes(
    server: RunningServer, tmp_path: Path
) -> None:
    dest = tmp_path / "data.bin"
    part = tmp_path / "data.bin.part"
    server.state.mode = "trickle"  # 1 byte per 20 ms: 50 bytes/s, however busy the machine
    # No clock is read here: the message says which window ended the transfer (the default
    # one is 60 s), and a busy machine only makes the trickle slower still.
    with pytest.raises(DownloadError) as info:
        download(server.url(), dest, sha256=SHA, timeout=PATIENCE, min_rate=1000,
                 rate_window=0.3)
    message = str(info.value)
    assert "too slow" in message and "below the minimum of 1000 bytes/s" in message
    window = re.search(r"bytes in the last ([\d.e+-]+) s", message)
    assert window is not None and 0.3 <= float(window[1]) < 60, message
    assert RESUME_HINT in message and str(part) in message and "valid prefix" in message
    kept = part.read_bytes()
    assert 0 < len(kept) < len(BODY) and kept == BODY[: len(kept)]

    server.state.mode = "normal"
    assert download(server.url(), dest, sha256=SHA).read_bytes() == BODY
    assert server.state.hits[-1].range == f"bytes={len(kept)}-"
    assert not part.exists()


def test_deadline_bounds_the_whole_transfer(server: RunningServer, tmp_path: Path) -> None:
    server.state.mode = "trickle"  # never ends by itself: only the deadline can end it
    with pytest.raises(DownloadError, match=r"within the deadline of 0\.3 s") as info:
        download(server.url(), tmp_path / "d.bin", sha256=SHA, timeout=PATIENCE, min_rate=0,
                 deadline=0.3)
    assert RESUME_HINT in str(info.value)


class _Response:
    """A 200 response giving ``pieces`` one read at a time, advancing a fake clock."""

    status = 200

    def __init__(self, pieces: list[bytes], clock: _Clock, seconds_per_read: float,
                 length: int | None) -> None:
        self.headers = {} if length is None else {"Content-Length": str(length)}
        self._pieces, self._clock, self._step = list(pieces), clock, seconds_per_read

    def read(self, size: int) -> bytes:
        self._clock.now += self._step
        return self._pieces.pop(0) if self._pieces else b""

    def close(self) -> None:
        pass

    def __enter__(self) -> _Response:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Case(NamedTuple):
    bytes_per_read: int
    min_rate: float
    fails: bool


@pytest.mark.parametrize("case", [
    _Case(100, 99, False),   # 100 bytes/s, just above the floor
    _Case(100, 101, True),   # just below it
    _Case(100, 0, False),    # the check turned off
])
def test_rate_is_averaged_over_each_window(tmp_path: Path, case: _Case) -> None:
    """With a fake clock (1 s per read), a transfer stops exactly when a window's average is
    below the floor, and only once a whole window has passed."""
    pieces = [bytes([i % 256]) * case.bytes_per_read for i in range(30)]
    data = b"".join(pieces)
    clock = _Clock()
    call = lambda: download(  # noqa: E731
        "http://fake/", tmp_path / "d.bin", sha256=hashlib.sha256(data).hexdigest(),
        urlopen=lambda *a, **k: _Response(pieces, clock, 1.0, len(data)),
        min_rate=case.min_rate, rate_window=10, clock=clock)
    if not case.fails:
        assert call().read_bytes() == data
        return
    with pytest.raises(DownloadError, match="1000 bytes in the last 10 s") as info:
        call()
    assert "after 1000 of 3000 bytes" in str(info.value)
    assert (tmp_path / "d.bin.part").read_bytes() == data[:1000]


# -- endless and oversized bodies ----------------------------------------------------------


def test_endless_body_stops_at_the_bound_and_deletes_the_part(
    server: RunningServer, tmp_path: Path
) -> None:
    server.state.mode = "endless"
    dest = tmp_path / "d.bin"
    with pytest.raises(DownloadError) as info:
        download(server.url(), dest, sha256=SHA, max_bytes=200_000, chunk_size=CHUNK)
    message = str(info.value)
    assert "sent more than 200000 bytes (200.0 kB)" in message
    assert "deleted" in message and "--url" in message
    assert not isinstance(info.value, ChecksumError)
    assert not dest.exists() and not (tmp_path / "d.bin.part").exists()
    assert server.state.hits[0].bytes_sent < ENDLESS_CAP  # the client hung up


def test_announced_size_past_the_bound_is_refused_before_writing(
    server: RunningServer, tmp_path: Path
) -> None:
    server.state.mode = "huge-length"
    part = tmp_path / "d.bin.part"
    part.write_bytes(BODY[:1000])  # an earlier valid prefix survives the refusal
    with pytest.raises(DownloadError) as info:
        download(server.url(), tmp_path / "d.bin", sha256=SHA, max_bytes=500_000)
    message = str(info.value)
    assert f"announces {2**40} bytes" in message and "500000 bytes" in message
    assert "nothing was downloaded" in message
    assert part.read_bytes() == BODY[:1000]


def test_body_longer_than_its_content_length_is_cut_off(tmp_path: Path) -> None:
    clock = _Clock()
    with pytest.raises(DownloadError, match="more than 150 bytes \\(its own Content-Length\\)"):
        download("http://fake/", tmp_path / "d.bin", sha256=None,
                 urlopen=lambda *a, **k: _Response([b"x" * 100] * 5, clock, 0.0, 150))
    assert not (tmp_path / "d.bin.part").exists()


def test_fetch_bounds_an_endless_body_by_the_manifests_size(tmp_path: Path) -> None:
    manifest = tiny_archive(tmp_path / "tiny.tar.bz2")
    size = manifest.archive.approx_size_bytes
    home = tmp_path / "home"
    with serve(b"BZh9") as server:
        server.state.mode = "endless"
        m = manifest.to_dict()
        m["archive"] = {**m["archive"], "url": server.url()}
        (tmp_path / "m.json").write_text(json.dumps(m))
        result = CliRunner().invoke(main, ["fetch", "--home", str(home), "--manifest",
                                           str(tmp_path / "m.json"), "--quiet"])
        sent = server.state.hits[0].bytes_sent
    assert result.exit_code == 1
    assert f"Error: {server.url()} sent more than {size_bound(size)} bytes" in result.output
    assert sent < ENDLESS_CAP
    assert list((home / "downloads").iterdir()) == []
    assert not (home / "store").exists()


def test_fetch_passes_its_rate_limits_down(server: RunningServer, tmp_path: Path) -> None:
    server.state.mode = "trickle"
    with pytest.raises(DownloadError, match=RESUME_HINT):
        fetch(home=tmp_path, url=server.url(), sha256=SHA, min_rate=1000, rate_window=0.2)
    part = tmp_path / "downloads" / "batch_science_data.tar.bz2.part"
    assert part.read_bytes() == BODY[: part.stat().st_size]


# -- the disk ------------------------------------------------------------------------------


class _Usage(NamedTuple):
    total: int
    used: int
    free: int


def _fill_disk_after(monkeypatch: pytest.MonkeyPatch, writes: int, code: int) -> None:
    """Let ``writes`` chunk writes through, then fail every write with ``code``."""
    real = download_module._write_all
    count = iter(range(10**9))

    def write(out: Any, data: bytes) -> None:
        if next(count) >= writes:
            out.write(data[: len(data) // 2])  # half a chunk lands, as on a real full disk
            raise OSError(code, "No space left on device")
        real(out, data)

    monkeypatch.setattr(download_module, "_write_all", write)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: _Usage(10**9, 10**9 - 4096, 4096))


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_full_disk_names_the_folder_the_room_needed_and_keeps_a_valid_prefix(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    dest = tmp_path / "data.bin"
    part = tmp_path / "data.bin.part"
    _fill_disk_after(monkeypatch, 3, code)
    with pytest.raises(DownloadError) as info:
        download(server.url(), dest, sha256=SHA, chunk_size=CHUNK)
    message = str(info.value)
    done = part.stat().st_size  # three reads' worth: a read returns what has arrived
    assert 0 < done <= 3 * CHUNK
    assert part.read_bytes() == BODY[:done]  # the half chunk was cut away
    assert f"no room left in {tmp_path}" in message
    assert f"{len(BODY) - done} bytes" in message and "more are needed" in message
    assert "4096 bytes (4.1 kB) are free" in message
    assert f"The {done} bytes written so far are kept in {part}, a valid prefix" in message
    assert RESUME_HINT in message and "--home" in message

    monkeypatch.undo()
    assert download(server.url(), dest, sha256=SHA, chunk_size=CHUNK).read_bytes() == BODY
    assert server.state.hits[-1].range == f"bytes={done}-"


def test_full_disk_on_the_first_write_leaves_no_part(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill_disk_after(monkeypatch, 0, errno.ENOSPC)
    with pytest.raises(DownloadError, match=f"{len(BODY)} bytes .*more are needed") as info:
        download(server.url(), tmp_path / "d.bin", sha256=SHA, chunk_size=CHUNK)
    assert "No partial file is kept" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_full_disk_during_fetch_is_a_clear_cli_error(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill_disk_after(monkeypatch, 1, errno.ENOSPC)
    result = CliRunner().invoke(main, ["fetch", "--home", str(tmp_path), "--url", server.url(),
                                       "--sha256", SHA, "--quiet"])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: no room left in {tmp_path / 'downloads'}")
    assert "Traceback" not in result.output
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_unwritable_downloads_folder_says_so(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    _fill_disk_after(monkeypatch, 0, code)
    with pytest.raises(DownloadError, match=f"cannot write in the downloads folder {tmp_path}"):
        download(server.url(), tmp_path / "d.bin", sha256=SHA)
    assert list(tmp_path.iterdir()) == []


def test_downloads_folder_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "home").write_text("a file where the home folder should be")
    with pytest.raises(DownloadError, match="cannot write in the downloads folder") as info:
        download("http://unused.invalid/", tmp_path / "home" / "downloads" / "d.bin",
                 sha256=None)
    assert "--home" in str(info.value)


@pytest.mark.parametrize(("option", "value"), [
    ("max_bytes", 0), ("min_rate", -1.0), ("rate_window", 0.0), ("deadline", 0.0),
])
def test_limits_out_of_range_fail_before_any_request(
    tmp_path: Path, option: str, value: float
) -> None:
    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no request expected")

    with pytest.raises(DownloadError, match=f"{option}={value!r} is out of range: expected"):
        download("http://unused.invalid/", tmp_path / "d.bin", sha256=None,
                 urlopen=no_network, **{option: value})
