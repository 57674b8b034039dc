"""A manifest is input: its archive file name stays a bare name inside the downloads folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import DownloadError, ManifestError
from curvekit.release.download import download
from curvekit.release.manifest import (
    MAX_FILE_NAME_LENGTH,
    Manifest,
    check_file_name,
    load_manifest,
)
from curvekit.store.fetch import fetch
from tests.httpserver import serve

BZ2 = b"BZh91AY&SY" + bytes(100)  # what the attack wrote over its victim
VICTIM = b"precious: must survive every refused manifest\n"


def _no_network(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a refused download must not touch the network")


def _manifest_data(**archive: object) -> dict[str, Any]:
    data = load_manifest().to_dict()
    return {**data, "archive": {**data["archive"], **archive}}


def _write_manifest(path: Path, **archive: object) -> Path:
    path.write_text(json.dumps(_manifest_data(**archive)))
    return path


BAD_NAMES: list[object] = [
    "/tmp/victim.tar.bz2", "../../x.tar.bz2", "..", ".", "", "a/b.tar.bz2", "a\\b.tar.bz2",
    "C:x.tar.bz2", "C:\\x.tar.bz2", "x\x00.tar.bz2", "x\n.tar.bz2", "x\x1b[2J", "x\x7f",
    " x.tar.bz2", "x.tar.bz2 ", "a" * (MAX_FILE_NAME_LENGTH + 1), "é" * 101, "x\udc80",
    5, None, ["x"],
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_unsafe_file_names_are_refused_with_the_value_and_the_fix(name: object) -> None:
    with pytest.raises(ManifestError) as info:
        Manifest.from_dict(_manifest_data(file_name=name))
    message = str(info.value)
    assert repr(name) in message
    assert "archive.file_name" in message and "bare file name" in message
    assert "Fix archive.file_name in the manifest" in message


@pytest.mark.parametrize("name", ["batch_science_data.tar.bz2", "data (1).tar.bz2",
                                  "ünïcode.tar.bz2", "a..b.tar.bz2", ".hidden.tar.bz2",
                                  "a" * MAX_FILE_NAME_LENGTH])
def test_bare_file_names_are_accepted(name: str) -> None:
    assert Manifest.from_dict(_manifest_data(file_name=name)).archive.file_name == name


@settings(max_examples=50, deadline=None)
@given(name=st.text(max_size=40))
def test_any_accepted_name_stays_directly_inside_the_folder(name: str) -> None:
    """Whatever the text, an accepted name resolves to a file directly in the folder."""
    folder = Path("/nonexistent-curvekit-downloads")
    try:
        check_file_name(name)
    except ManifestError:
        return
    assert (folder / name).resolve().parent == folder.resolve()
    assert Path(name).name == name and not Path(name).is_absolute()


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("sha256", "abc", "64 hexadecimal digits"),
    ("sha256", "g" * 64, "64 hexadecimal digits"),
    ("sha256", 123, "64 hexadecimal digits"),
    ("approx_size_bytes", -1, "from 1 to"),
    ("approx_size_bytes", 0, "from 1 to"),
    ("approx_size_bytes", 2**41, "from 1 to"),
    ("approx_size_bytes", True, "from 1 to"),
    ("approx_size_bytes", 1.5, "from 1 to"),
    ("approx_size_bytes", "802000000", "from 1 to"),
    ("url", "ftp://example.org/x.tar.bz2", "http://, https:// or file://"),
    ("url", "javascript:alert(1)", "http://, https:// or file://"),
    ("url", "https:", "http://, https:// or file://"),
    ("url", 7, "http://, https:// or file://"),
    ("root", "../batch_science", "archive.root"),
    ("root", "/batch_science", "archive.root"),
])
def test_other_archive_fields_are_checked(field: str, value: object, expected: str) -> None:
    with pytest.raises(ManifestError, match=f"archive.{field}") as info:
        Manifest.from_dict(_manifest_data(**{field: value}))
    assert expected in str(info.value) and repr(value) in str(info.value)


def test_from_file_names_the_manifest_file(tmp_path: Path) -> None:
    path = _write_manifest(tmp_path / "m.json", file_name="../../x.tar.bz2")
    with pytest.raises(ManifestError, match=f"manifest {path}: archive.file_name '../../x"):
        Manifest.from_file(path)


@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_fetch_with_an_escaping_file_name_leaves_the_victim_untouched(
    tmp_path: Path, how: str
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    home = tmp_path / "home"
    # from <home>/downloads, ../../victim.txt is tmp_path/victim.txt
    name = str(victim) if how == "absolute" else "../../victim.txt"
    with serve(BZ2) as server:
        manifest = _write_manifest(tmp_path / "m.json", file_name=name, url=server.url(),
                                   sha256=hashlib.sha256(BZ2).hexdigest())
        result = CliRunner().invoke(main, ["fetch", "--home", str(home), "--manifest",
                                           str(manifest), "--quiet"])
        assert server.state.hits == []
    assert result.exit_code == 1
    assert result.output.startswith("Error: ")
    assert repr(name) in result.output and "bare file name" in result.output
    assert victim.read_bytes() == VICTIM
    assert not (home / "store").exists()


def test_download_refuses_a_dest_outside_its_folder(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    folder = tmp_path / "home" / "downloads"
    with pytest.raises(DownloadError, match="not inside the downloads folder"):
        download("http://unused.invalid/", folder / ".." / ".." / "victim.txt", within=folder,
                 sha256=None, urlopen=_no_network)
    assert victim.read_bytes() == VICTIM


@pytest.mark.parametrize("link", ["data.bin", "data.bin.part"])
def test_download_refuses_a_symlink_out_of_its_folder(tmp_path: Path, link: str) -> None:
    """Defence in depth: a link planted in the folder does not redirect the write."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / link).symlink_to(victim)
    with pytest.raises(DownloadError, match=f"resolves to {victim}"):
        download("http://unused.invalid/", folder / "data.bin", within=folder, sha256=None,
                 urlopen=_no_network)
    assert victim.read_bytes() == VICTIM


def test_a_symlinked_downloads_folder_still_works(tmp_path: Path) -> None:
    """Users move the downloads folder to a bigger disk with a link: that stays allowed."""
    (tmp_path / "big-disk").mkdir()
    (tmp_path / "home").mkdir()
    folder = tmp_path / "home" / "downloads"
    folder.symlink_to(tmp_path / "big-disk")
    with serve(BZ2) as server:
        download(server.url(), folder / "a.tar.bz2", within=folder,
                 sha256=hashlib.sha256(BZ2).hexdigest())
    assert (tmp_path / "big-disk" / "a.tar.bz2").read_bytes() == BZ2


def test_fetch_refuses_a_directly_built_manifest_with_a_bad_name(tmp_path: Path) -> None:
    """Validation lives in the manifest's constructor, so no way around it reaches fetch."""
    with pytest.raises(ManifestError):
        fetch(home=tmp_path, manifest=Manifest.from_dict(_manifest_data(file_name="/etc/x")),
              urlopen=_no_network)
