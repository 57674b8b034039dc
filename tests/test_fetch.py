"""``curvekit fetch`` end to end against a local HTTP server."""

from __future__ import annotations

import hashlib
from pathlib import Path

from click.testing import CliRunner

from curvekit.cli import main
from tests.conftest import small_members, snapshot, write_archive
from tests.httpserver import serve, unused_port


def _archive(tmp_path: Path, trials: int = 300) -> tuple[bytes, str]:
    path = write_archive(tmp_path / "src.tar.bz2", small_members(trials=tuple(range(1, trials))))
    data = path.read_bytes()
    return data, hashlib.sha256(data).hexdigest()


def test_fetch_downloads_resumes_and_converts(tmp_path: Path) -> None:
    data, sha = _archive(tmp_path)
    home = tmp_path / "home"
    with serve(data) as server:
        args = ["fetch", "--home", str(home), "--url", server.url("/a.tar.bz2"),
                "--sha256", sha]
        server.state.mode, server.state.break_after = "break", len(data) // 3
        broken = CliRunner().invoke(main, args)
        assert broken.exit_code == 1
        assert "re-run" in broken.output.lower() and str(len(data) // 3) in broken.output
        assert not (home / "store").exists()
        server.state.mode = "normal"
        resumed = CliRunner().invoke(main, args)
        assert resumed.exit_code == 0, resumed.output
        assert server.state.hits[-1].range == f"bytes={len(data) // 3}-"
        assert server.state.hits[-1].bytes_sent == len(data) - len(data) // 3
        assert "Converted" in resumed.output and "2 studies" in resumed.output
        again = CliRunner().invoke(main, args)
        assert "Nothing to do" in again.output
        assert len(server.state.hits) == 2  # the up-to-date run made no request
    assert (home / "downloads" / "batch_science_data.tar.bz2").read_bytes() == data


def test_fetch_with_wrong_checksum_deletes_and_keeps_store(tmp_path: Path) -> None:
    data, sha = _archive(tmp_path, trials=5)
    home = tmp_path / "home"
    with serve(data) as server:
        ok = CliRunner().invoke(main, ["fetch", "--home", str(home), "--url", server.url(),
                                       "--sha256", sha, "--quiet"])
        assert ok.exit_code == 0, ok.output
        before = snapshot(home)
        server.state.mode = "wrong-content"
        other = "ab" * 32
        bad = CliRunner().invoke(main, ["fetch", "--home", str(home), "--url", server.url(),
                                        "--sha256", other, "--quiet"])
    assert bad.exit_code == 1
    assert f"expected {other}" in bad.output and "got " in bad.output
    assert not list((home / "downloads").glob("*.part"))
    after = snapshot(home)
    # the good archive is still cached; only the failed download is gone
    assert after == before


def test_fetch_offline_names_url_and_archive_alternative(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{unused_port()}/batch_science_data.tar.bz2"
    result = CliRunner().invoke(main, ["fetch", "--home", str(tmp_path), "--url", url])
    assert result.exit_code == 1
    assert url in result.output and "--archive" in result.output


def test_fetch_uses_env_home(tmp_path: Path, monkeypatch: object) -> None:
    data, sha = _archive(tmp_path, trials=3)
    (tmp_path / "a.tar.bz2").write_bytes(data)
    result = CliRunner(env={"CURVEKIT_HOME": str(tmp_path / "envhome")}).invoke(
        main, ["fetch", "--archive", str(tmp_path / "a.tar.bz2"), "--sha256", sha, "--quiet"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "envhome" / "store" / "_store.json").is_file()
