"""Hostile homes: links in and around a curvekit home, and damaged files curvekit reads back.

docs/security.md, "The store on disk", makes these claims; each test names the one it checks:

- *inside the home only*: a writer refuses a ``store`` link, ``stores`` folder, ``.lock``
  or downloads folder leading outside the home (or round in a loop), naming the link,
  and touches nothing;
- *only what curvekit made*: cleanup removes only folders curvekit named, carrying its
  marker, holding nothing but recorded files;
- *readers create nothing*: a reader never creates a lease file, nor opens one through a link;
- *damaged JSON is named*: every JSON file curvekit reads back from its home, damaged or
  nested too deep, is an error naming the file; ``verify`` names a damaged ``_files.json``
  and calls no data file damaged or unexpected by it, nor advises deleting any.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import CurvekitError, StoreError
from curvekit.release.download import file_sha256
from curvekit.store.build import convert
from curvekit.store.catalog import verify
from curvekit.store.fetch import fetch
from curvekit.store.store import Store
from curvekit.store.transaction import lock_home
from curvekit.store.update import add_workload, remove_workload
from tests.conftest import small_members, snapshot, write_archive
from tests.test_update import NAME, workload

OTHER = "other_data/mlp_64/sgd"
DEEP = "[" * 100_000 + "]" * 100_000


# -- homes ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home holding a converted miniature release and one added workload."""
    top = tmp_path_factory.mktemp("template")
    archive = write_archive(top / "small.tar.bz2", small_members())
    convert(archive, top / "home")
    add_workload(top / "home", workload())
    return top


def make_home(template: Path, where: Path) -> Path:
    """A copy of the template's home under ``where`` (links copied as links), without its
    lock file (made again by the first writer)."""
    shutil.copytree(template / "home", where / "home", symlinks=True)
    (where / "home" / ".lock").unlink()
    return where / "home"


def current(home: Path) -> Path:
    return (home / "store").resolve()


def tree(top: Path, skip: Path | None = None) -> dict[str, tuple[Any, ...]]:
    """Every path under ``top`` (links not followed, ``skip`` left out): kind, mtime, size,
    content digest or link target. Equal before and after: nothing there was touched."""
    out: dict[str, tuple[Any, ...]] = {}
    for folder, dirs, files in os.walk(top):
        here = Path(folder)
        if skip is not None:
            dirs[:] = [d for d in dirs if here / d != skip]
        for name in [".", *dirs, *files]:
            path = here / name if name != "." else here
            st_ = path.lstat()
            if path.is_symlink():
                detail: Any = os.readlink(path)
            elif path.is_file():
                detail = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                detail = None
            out[path.relative_to(top).as_posix()] = (st_.st_mode, st_.st_mtime_ns,
                                                     st_.st_size, detail)
    return out


def user_files(top: Path) -> list[tuple[str, str]]:
    """Names and contents of the user's own files (``user-*.txt``) anywhere under ``top``."""
    found = []
    for folder, _, files in os.walk(top):
        for name in files:
            path = Path(folder) / name
            if name.startswith("user-") and not path.is_symlink():
                found.append((name, path.read_text()))
    return sorted(found)


def copy_snapshot(source: Path, dest: Path, note: str) -> Path:
    """A copy of a snapshot folder (links as links) with a file of the user's in it."""
    shutil.copytree(source, dest, symlinks=True)
    (dest / f"user-{note}.txt").write_text(f"my own notes: {note}")
    return dest


def run_cli(*args: str | Path) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


# -- inside the home only: the store link ----------------------------------------------------


WRITERS: dict[str, Callable[[Path, Path], Any]] = {
    "add": lambda home, top: add_workload(home, workload(OTHER)),
    "remove": lambda home, top: remove_workload(home, NAME),
    "fetch --force": lambda home, top: convert(top / "small.tar.bz2", home),
}


@pytest.fixture
def two_homes(template: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Home A with its store, and home B whose ``store`` links to A's snapshot."""
    a = make_home(template, tmp_path / "a")
    b = tmp_path / "b"
    b.mkdir()
    (b / "store").symlink_to(current(a))
    return a, b


@pytest.mark.parametrize("writer", WRITERS)
def test_inside_the_home_only_a_store_link_to_another_homes_snapshot_is_refused(
        two_homes: tuple[Path, Path], template: Path, writer: str) -> None:
    """Claim: a writer refuses a ``store`` link leading outside its home, names the link,
    and touches nothing (before, it deleted the other home's store when it published)."""
    a, b = two_homes
    before = tree(a.parent.parent, skip=b)
    with pytest.raises(StoreError, match="outside the curvekit home") as refused:
        WRITERS[writer](b, template)
    assert str(b / "store") in str(refused.value)
    assert "rm " in str(refused.value)  # the fix
    assert tree(a.parent.parent, skip=b) == before
    assert sorted(p.name for p in b.iterdir()) == ["store"]  # not even a lock file


@pytest.mark.parametrize("writer", WRITERS)
def test_inside_the_home_only_a_copied_store_folder_linked_as_the_store_is_kept(
        template: Path, tmp_path: Path, writer: str) -> None:
    """Claim: a ``store`` link to a copy of a store outside the home (with files of the
    user's in it) is refused; the copy stays as it was."""
    home = make_home(template, tmp_path)
    copy = copy_snapshot(current(home), tmp_path / "my-copy", "copy")
    (home / "store").unlink()
    (home / "store").symlink_to(copy)
    before = tree(tmp_path, skip=home)
    with pytest.raises(StoreError, match=str(home / "store")):
        WRITERS[writer](home, template)
    assert tree(tmp_path, skip=home) == before


@pytest.mark.parametrize("link", ["dangling", "file", "folder", "loop", "inside",
                                  "a real folder"])
def test_inside_the_home_only_a_lock_link_is_refused_and_nothing_is_created(
        template: Path, tmp_path: Path, link: str) -> None:
    """Claim: ``.lock`` is a plain file, never opened or created through a link (before, a
    dangling ``.lock`` link made curvekit create a file outside its home)."""
    home = make_home(template, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "user-file.txt").write_text("mine")
    if link == "a real folder":
        (home / ".lock").mkdir()
    else:
        target = {"dangling": outside / "created-by-curvekit",
                  "file": outside / "user-file.txt", "folder": outside,
                  "loop": home / ".lock", "inside": home / "stores"}[link]
        (home / ".lock").symlink_to(target)
    before, inside = tree(tmp_path, skip=home), snapshot(home)
    for writer in WRITERS.values():
        with pytest.raises(StoreError, match=str(home / ".lock")):
            writer(home, template)
    assert tree(tmp_path, skip=home) == before and snapshot(home) == inside


def test_inside_the_home_only_a_stores_link_leading_outside_is_refused(
        template: Path, tmp_path: Path) -> None:
    """Claim: the ``stores`` folder must lie inside the home."""
    home = make_home(template, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (home / "stores").rename(elsewhere)
    (home / "stores").symlink_to(elsewhere)
    (elsewhere / ".staging-0123456789ab").mkdir()  # a folder cleanup would remove, by name
    before = tree(tmp_path, skip=home)
    for writer in WRITERS.values():
        with pytest.raises(StoreError, match=str(home / "stores")):
            writer(home, template)
    assert tree(tmp_path, skip=home) == before


@pytest.mark.parametrize("kind", ["outside", "dangling"])
def test_inside_the_home_only_a_downloads_link_leading_outside_is_refused(
        template: Path, tmp_path: Path, kind: str) -> None:
    """Claim: ``fetch`` writes downloads only inside the home."""
    home = make_home(template, tmp_path)
    outside = tmp_path / "outside"
    if kind == "outside":
        outside.mkdir()
    (home / "downloads").symlink_to(outside)
    archive = template / "small.tar.bz2"
    before = tree(tmp_path, skip=home)
    with pytest.raises(StoreError, match=str(home / "downloads")):
        fetch(home=home, url=archive.as_uri(), sha256=file_sha256(archive), force=True)
    assert tree(tmp_path, skip=home) == before


def test_inside_the_home_only_reading_through_an_outside_store_link_changes_nothing(
        two_homes: tuple[Path, Path]) -> None:
    """Claim: reading through a ``store`` link that leads outside the home is allowed, and
    creates or changes nothing there."""
    a, b = two_homes
    before = tree(a)
    with Store.open(b) as store:
        assert NAME in store.workloads()
    assert verify(Store.open(b)).ok
    assert tree(a) == before


def test_inside_the_home_only_the_runners_work_folder(tmp_path: Path) -> None:
    """Claim: the runner's default work folder (``<home>/runs/…``) stays in the home: a
    ``runs`` link leading outside is refused before anything is trained or written."""
    pytest.importorskip("torch")
    import curvekit

    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (home / "runs").symlink_to(outside)
    with pytest.raises(StoreError, match=str(home / "runs")):
        curvekit.run("tiny", dataset="digits", model="fc_32", optimizers=["sgd"],
                     batch_sizes=[16], trials=1, steps=2, eval_every=1, device="cpu",
                     home=home)
    assert not list(outside.iterdir())


def test_inside_the_home_only_the_cli_says_error_and_the_fix(two_homes: tuple[Path, Path],
                                                             template: Path) -> None:
    """Claim: the refusal reaches the command line as ``Error: …`` naming the link."""
    _, b = two_homes
    result = run_cli("fetch", "--home", b, "--archive", template / "small.tar.bz2",
                     "--sha256", file_sha256(template / "small.tar.bz2"), "--force")
    assert result.exit_code == 1, result.output
    error = result.output.splitlines()[-1]  # after the progress lines
    assert error.startswith("Error: ") and str(b / "store") in error, result.output
    assert "Checking sha256" not in result.output  # refused before reading the archive


def test_inside_the_home_only_a_store_link_inside_the_home_still_works(
        template: Path, tmp_path: Path) -> None:
    """A ``store`` link to a folder inside the home (not a snapshot curvekit named) is
    written from, and kept: it is not curvekit's to remove."""
    home = make_home(template, tmp_path)
    mine = copy_snapshot(current(home), home / "my-store", "inside")
    (home / "store").unlink()
    (home / "store").symlink_to(mine)
    add_workload(home, workload(OTHER))
    assert (mine / "user-inside.txt").read_text() == "my own notes: inside"
    assert OTHER in Store.open(home).workloads()


# -- only what curvekit made -------------------------------------------------------------


def _snapshot_name() -> str:
    return f"local-{uuid.uuid4().hex[:12]}"


def test_only_what_curvekit_made_a_snapshot_with_a_file_of_yours_is_kept(
        template: Path, tmp_path: Path) -> None:
    """Claim: cleanup touches nothing but curvekit's own snapshots: one you put a file
    into is kept when the store moves on (before, it was deleted with your file)."""
    home = make_home(template, tmp_path)
    old = current(home)
    (old / "user-notes.txt").write_text("my own notes")
    add_workload(home, workload(OTHER))
    assert (old / "user-notes.txt").read_text() == "my own notes"
    add_workload(home, workload(OTHER, scale=0.5), replace=True)  # and by later cleanups
    assert (old / "user-notes.txt").read_text() == "my own notes"
    assert verify(Store.open(home)).ok


@pytest.mark.parametrize("extra", ["user file", "pristine"])
def test_only_what_curvekit_made_a_copy_under_a_snapshot_name_is_kept(
        template: Path, tmp_path: Path, extra: str) -> None:
    """Claim: a folder named like a snapshot but copied there (its marker names another
    snapshot) is not curvekit's: cleanup keeps it."""
    home = make_home(template, tmp_path)
    copy = home / "stores" / _snapshot_name()
    shutil.copytree(current(home), copy, symlinks=True)
    if extra == "user file":
        (copy / "user-x.txt").write_text("mine")
    before = tree(copy)
    add_workload(home, workload(OTHER))
    assert tree(copy) == before


@pytest.mark.parametrize("change", ["no marker", "no lease", "a link in it"])
def test_only_what_curvekit_made_a_snapshot_without_its_marker_or_lease_is_kept(
        template: Path, tmp_path: Path, change: str) -> None:
    """Claim: a snapshot without the marker (written by an earlier curvekit), without its
    lease file (a reader may hold it without one) or with a link in it is never removed."""
    home = make_home(template, tmp_path)
    old = current(home)
    if change == "a link in it":
        (old / "studies" / "extra.parquet").symlink_to(tmp_path)
    else:
        (old / (".curvekit-snapshot" if change == "no marker" else ".lease")).unlink()
    add_workload(home, workload(OTHER))
    add_workload(home, workload(OTHER, scale=0.5), replace=True)
    assert old.is_dir() and (old / "_store.json").is_file()


def test_only_what_curvekit_made_a_snapshot_with_a_damaged_record_is_kept(
        template: Path, tmp_path: Path) -> None:
    """Claim: an old snapshot whose ``_files.json`` is damaged vouches for nothing, so
    cleanup keeps it."""
    home = make_home(template, tmp_path)
    old = current(home)
    reader = Store.open(home)  # holds the old snapshot while the store moves on
    add_workload(home, workload(OTHER))
    (old / "_files.json").write_text(DEEP)
    reader.close()
    add_workload(home, workload(OTHER, scale=0.5), replace=True)
    assert old.is_dir() and (old / "_files.json").read_text() == DEEP
    assert verify(Store.open(home)).ok


def test_only_what_curvekit_made_work_folders_without_the_marker_are_kept(
        template: Path, tmp_path: Path) -> None:
    """Claim: a ``.staging-*`` or ``.retired-*`` folder is removed only with the marker."""
    home = make_home(template, tmp_path)
    mine = [home / "stores" / ".staging-0123456789ab",
            home / "stores" / f".retired-{_snapshot_name()}-01234567",
            home / "stores" / "previous-1a2b3c4d"]
    for folder in mine:
        folder.mkdir()
        (folder / "user-work.txt").write_text("mine")
    add_workload(home, workload(OTHER))
    assert all((folder / "user-work.txt").read_text() == "mine" for folder in mine)


def test_only_what_curvekit_made_its_own_leftovers_still_go(template: Path,
                                                            tmp_path: Path) -> None:
    """Old snapshots, a killed run's staging folder and a removal cut short are removed."""
    from curvekit.store.transaction import new_staging

    home = make_home(template, tmp_path)
    old = current(home)
    add_workload(home, workload(OTHER))
    assert not old.exists()
    staging = new_staging(home)  # what a killed run leaves
    (staging / "part.parquet").write_bytes(b"half")
    before = current(home)
    add_workload(home, workload(OTHER, scale=0.5), replace=True)
    assert not before.exists() and not staging.exists()
    assert sorted(p.name for p in (home / "stores").iterdir()) == [current(home).name]


def test_only_what_curvekit_made_a_retired_folder_cut_short_is_finished(
        template: Path, tmp_path: Path) -> None:
    """A removal killed midway leaves its marker (removed last), so the next writer ends it."""
    from curvekit.store.confine import MARKER

    home = make_home(template, tmp_path)
    snap = current(home)
    grave = home / "stores" / f".retired-{snap.name}-0123abcd"
    shutil.copytree(snap, grave)
    for child in grave.iterdir():  # the first half of a removal
        if child.is_dir():
            shutil.rmtree(child)
    assert (grave / MARKER).is_file()
    with lock_home(home):
        pass
    assert not grave.exists()


# -- readers create nothing ----------------------------------------------------------------


@pytest.mark.parametrize("lease", ["missing", "dangling link"])
def test_readers_create_nothing_a_lease_is_never_created(template: Path, tmp_path: Path,
                                                         lease: str) -> None:
    """Claim: a reader never creates a lease file, nor opens one through a link (before,
    opening a store linked from elsewhere created ``.lease`` in it, or at a link's target)."""
    home = make_home(template, tmp_path)
    snap = current(home)
    (snap / ".lease").unlink()
    if lease == "dangling link":
        (snap / ".lease").symlink_to(tmp_path / "created-by-a-reader")
    before = tree(tmp_path)
    with Store.open(home) as store:
        assert store.workloads()
    assert tree(tmp_path) == before


# -- damaged JSON is named -----------------------------------------------------------------


DAMAGE = {
    "not JSON": b"{not json",
    "nested 100,000 deep": DEEP.encode(),
    "not UTF-8": b'{"files": "\xff"}',
    "a list": b"[]",
    "records of the wrong shape": b'{"files": {"x.parquet": 7}}',
    "empty": b"",
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_json_is_named_verify_names_a_damaged_files_json(
        template: Path, tmp_path: Path, damage: str) -> None:
    """Claim: ``verify`` names a damaged ``_files.json``, judges no data file by it and
    advises deleting none (before: every good file was "unexpected … delete it", and a
    deeply nested file was a traceback)."""
    home = make_home(template, tmp_path)
    (current(home) / "_files.json").write_bytes(DAMAGE[damage])
    result = run_cli("verify", "--home", home)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "_files.json is damaged" in result.output
    assert "unexpected" not in result.output and "delete it" not in result.output
    blamed = [line for line in result.output.splitlines()
              if line.startswith(("studies/", "trials/", "measurements/"))]
    assert not blamed  # no data file is blamed
    problems = verify(Store.open(home)).problems
    assert len(problems) == 1 and "_files.json" in problems[0]


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("damage", ["not JSON", "nested 100,000 deep"])
def test_damaged_json_is_named_by_every_writer(template: Path, tmp_path: Path, writer: str,
                                               damage: str) -> None:
    """Claim: a writer that meets a damaged ``_files.json`` stops with an error naming it,
    and the store is exactly as it was (before: a traceback in every ``add``)."""
    home = make_home(template, tmp_path)
    record = current(home) / "_files.json"
    record.write_bytes(DAMAGE[damage])
    before = snapshot(home)
    with pytest.raises(StoreError, match=r"_files\.json is damaged") as refused:
        WRITERS[writer](home, template)
    assert str(record) in str(refused.value)
    assert snapshot(home) == before


@pytest.mark.parametrize("writer", WRITERS)
def test_damaged_json_is_named_a_deep_store_json(template: Path, tmp_path: Path,
                                                 writer: str) -> None:
    """Claim: ``_store.json`` nested too deep is an error naming it."""
    home = make_home(template, tmp_path)
    (current(home) / "_store.json").write_text(DEEP)
    with pytest.raises(StoreError, match=r"_store.json is damaged: it nests deeper"):
        WRITERS[writer](home, template)
    result = run_cli("info", "--home", home)
    assert result.exit_code == 1 and "_store.json is damaged" in result.output


def test_damaged_json_is_named_a_deep_manifest(template: Path, tmp_path: Path) -> None:
    """Claim: the store's ``_manifest.json`` nested too deep is named by ``verify``."""
    home = make_home(template, tmp_path)
    (current(home) / "_manifest.json").write_text(DEEP)
    result = run_cli("verify", "--home", home)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "_manifest.json" in result.output and "nested too deeply" in result.output


def test_damaged_json_is_named_a_deep_metrics_footer(template: Path, tmp_path: Path) -> None:
    """Claim: a measurements file whose footer lists its metrics as deeply nested JSON is
    named (``info``), not a traceback."""
    home = make_home(template, tmp_path)
    path = next(current(home).glob("measurements/**/*.parquet"))
    table = pq.read_table(path)
    table = table.replace_schema_metadata({b"curvekit.metrics": DEEP.encode()})
    path.unlink()  # a new inode: the template's snapshot shares this one
    pq.write_table(table, path)
    result = run_cli("info", "--home", home)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert str(path) in result.output


def test_damaged_json_is_named_a_deep_sweep_plan(tmp_path: Path) -> None:
    """Claim: a sweep plan (``runs/…/plan.json``) nested too deep is named."""
    from curvekit.errors import RunError
    from curvekit.runner.parts import PLAN_FILE, open_work_dir
    from curvekit.runner.plan import Sweep

    (tmp_path / PLAN_FILE).write_text(DEEP)
    sweep = Sweep.create("x", dataset="digits", model="fc_32", optimizers=["sgd"],
                         batch_sizes=[8], trials=1, steps=2, eval_every=1, seed=0)
    with pytest.raises(RunError, match=r"plan\.json: nested too deeply"):
        open_work_dir(tmp_path, sweep)


@settings(max_examples=60, deadline=None)
@given(text=st.one_of(
    st.text(max_size=200),
    st.builds(lambda depth, kind: kind[0] * depth + kind[1] * depth,
              st.integers(0, 50_000), st.sampled_from([("[", "]"), ('{"a":', "}")])),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                 lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                 max_leaves=10).map(json.dumps)))
def test_damaged_json_is_named_for_any_text(text: str) -> None:
    """Claim: any file content gives either its JSON value or an error naming the file."""
    from curvekit.home import parse_json

    try:
        value = parse_json(text, lambda problem: StoreError(f"x.json: {problem}"))
    except StoreError as exc:
        assert str(exc).startswith("x.json: it ")
    else:
        assert value == json.loads(text)


# -- the property: any arrangement of links in and around a home ----------------------------


STORE_KINDS = ["normal", "absent", "outside copy", "outside folder", "dangling outside",
               "dangling inside", "loop", "relative outside", "inside copy", "folder copy",
               "home folder"]
LOCK_KINDS = ["absent", "file", "outside file", "dangling outside", "outside folder", "loop"]
STORES_KINDS = ["real", "outside", "inside"]
DOWNLOADS_KINDS = ["absent", "real", "outside", "dangling outside"]
EXTRAS = ["staging link", "retired link", "snapshot link", "snapshot copy with a file",
          "pristine snapshot copy", "staging folder of yours", "previous folder",
          "lease link", "lease dangling", "swap link"]
PROPERTY_WRITERS = ["add", "remove", "fetch --force", "fetch download", "cleanup", "read"]


def _arrange(home: Path, outside: Path, plan: dict[str, Any]) -> set[Path]:
    """Lay out ``plan`` in and around ``home``; return the links a writer must refuse."""
    outside.mkdir()
    (outside / "user-file.txt").write_text("outside file")
    (outside / "dir").mkdir()
    (outside / "dir" / "user-dir.txt").write_text("outside dir")
    snap = current(home)
    copy_snapshot(snap, outside / "copy", "outside-copy")
    stores, store, lock = home / "stores", home / "store", home / ".lock"
    refused: set[Path] = set()
    for extra in sorted(plan["extras"]):
        name = _snapshot_name()
        if extra == "staging link":
            (stores / f".staging-{uuid.uuid4().hex[:12]}").symlink_to(outside / "dir")
        elif extra == "retired link":
            (stores / f".retired-{name}-0123abcd").symlink_to(outside / "dir")
        elif extra == "snapshot link":
            (stores / name).symlink_to(outside / "dir")
        elif extra == "snapshot copy with a file":
            copy_snapshot(snap, stores / name, "stores-copy")
        elif extra == "pristine snapshot copy":
            shutil.copytree(snap, stores / name, symlinks=True)
        elif extra == "staging folder of yours":
            (stores / ".staging-abcdef012345").mkdir()
            (stores / ".staging-abcdef012345" / "user-staging.txt").write_text("mine")
        elif extra == "previous folder":
            copy_snapshot(snap, stores / "previous-1a2b3c4d", "previous")
        elif extra in ("lease link", "lease dangling"):
            (snap / ".lease").unlink()
            (snap / ".lease").symlink_to(outside / ("user-file.txt" if extra == "lease link"
                                                     else "lease-made-by-curvekit"))
        elif extra == "swap link":
            (home / ".store-0123abcd").symlink_to(outside / "dir")
    kind = plan["store"]
    if kind != "normal":
        store.unlink()
    if kind in ("outside copy", "outside folder", "dangling outside", "loop",
                "relative outside"):
        refused.add(store)
        target = {"outside copy": outside / "copy", "outside folder": outside / "dir",
                  "dangling outside": outside / "store-made-by-curvekit", "loop": store,
                  "relative outside": Path("..") / outside.name / "copy"}[kind]
        store.symlink_to(target)
    elif kind == "dangling inside":
        store.symlink_to(stores / _snapshot_name())
    elif kind == "inside copy":
        store.symlink_to(Path("stores") / copy_snapshot(snap, stores / _snapshot_name(),
                                                        "linked-copy").name)
    elif kind == "folder copy":
        copy_snapshot(snap, store, "store-folder")
    elif kind == "home folder":
        store.symlink_to(copy_snapshot(snap, home / "mine", "home-folder"))
    if plan["lock"] != "absent":
        if plan["lock"] == "file":
            lock.write_bytes(b"")
        else:
            refused.add(lock)
            lock.symlink_to({"outside file": outside / "user-file.txt",
                             "dangling outside": outside / "lock-made-by-curvekit",
                             "outside folder": outside / "dir", "loop": lock}[plan["lock"]])
    if plan["stores"] == "outside":
        refused.add(stores)
        stores.rename(outside / "stores")
        stores.symlink_to(outside / "stores")
    elif plan["stores"] == "inside":
        (home / "data").mkdir()
        stores.rename(home / "data" / "stores")
        stores.symlink_to(Path("data") / "stores")
    downloads = home / "downloads"
    if plan["downloads"] == "real":
        downloads.mkdir()
    elif plan["downloads"] in ("outside", "dangling outside"):
        downloads.symlink_to(outside / ("dir" if plan["downloads"] == "outside"
                                        else "downloads-made-by-curvekit"))
    return refused


def _write(writer: str, home: Path, template: Path) -> None:
    archive = template / "small.tar.bz2"
    if writer == "fetch download":
        fetch(home=home, url=archive.as_uri(), sha256=file_sha256(archive), force=True)
    elif writer == "cleanup":
        with lock_home(home):
            pass
    elif writer == "read":
        Store.open(home).close()
    else:
        WRITERS[writer](home, template)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Callable[[], Path]]:
    """A new empty folder for each hypothesis example (tmp_path is one per test)."""
    counter = iter(range(10**6))

    def make() -> Path:
        folder = tmp_path / str(next(counter))
        folder.mkdir()
        return folder

    yield make


@pytest.mark.parametrize("writer", PROPERTY_WRITERS)
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.fixed_dictionaries({
    "store": st.sampled_from(STORE_KINDS), "lock": st.sampled_from(LOCK_KINDS),
    "stores": st.sampled_from(STORES_KINDS), "downloads": st.sampled_from(DOWNLOADS_KINDS),
    "extras": st.sets(st.sampled_from(EXTRAS), max_size=4)}))
def test_inside_the_home_only_for_any_arrangement_of_links(
        template: Path, fresh: Callable[[], Path], writer: str, plan: dict[str, Any]) -> None:
    """Claims *inside the home only* and *only what curvekit made*, for any arrangement of
    ``store``, ``.lock``, ``stores``, downloads, snapshot, lease and outside links (inside,
    outside, dangling, loops) and copied store folders with files of the user's: whatever a
    writer does, no path outside the home is created, removed or written, no file of the
    user's is lost, and every refusal is a CurvekitError naming a link it refused."""
    top = fresh()
    home = make_home(template, top)
    refused = _arrange(home, top / "outside", plan)
    if writer == "fetch download" and plan["downloads"] in ("outside", "dangling outside"):
        refused.add(home / "downloads")
    if writer == "read":
        refused = set()  # readers read through links, and write nothing
    before, mine = tree(top, skip=home), user_files(top)
    try:
        _write(writer, home, template)
    except CurvekitError as exc:
        if refused:
            assert any(str(link) in str(exc) for link in refused), (str(exc), refused)
        else:  # refusals for other reasons: no store to read or remove from
            assert writer in ("remove", "read") or plan["store"] == "folder copy", str(exc)
    else:
        assert not refused or writer == "read", f"{writer} went through {refused}"
    assert tree(top, skip=home) == before
    # none lost (a file in the store a writer starts from is linked into the new snapshot)
    assert not Counter(mine) - Counter(user_files(top))


# -- a store folder with a user's files is kept when a store link replaces it -------------


def test_only_what_curvekit_made_a_store_folder_moved_by_hand_is_kept_aside(
        template: Path, tmp_path: Path) -> None:
    """A real folder at ``store`` (moved there by hand) is kept as ``stores/previous-*``."""
    home = make_home(template, tmp_path)
    snap = current(home)
    (home / "store").unlink()
    copy_snapshot(snap, home / "store", "by-hand")
    add_workload(home, workload(OTHER))
    kept = list((home / "stores").glob("previous-*"))
    assert len(kept) == 1 and (kept[0] / "user-by-hand.txt").is_file()

