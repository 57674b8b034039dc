"""Where curvekit keeps its downloads and its store, and the rule that keeps it there.

The home directory is, in order of precedence: an explicit path, the ``CURVEKIT_HOME``
environment variable, or the platform's user data directory (via platformdirs).

curvekit creates, writes, renames and removes files only inside its home. A path it is about
to touch goes through :func:`confined`, which follows every symbolic link on the way down
from the home and refuses a link that leads outside the home (or round in a loop), naming
the link and the fix, before anything is touched. Every JSON file curvekit reads back from
its home is parsed by :func:`read_json`: a file that cannot be read, is not JSON or nests
too deep is one error naming the file.

>>> from pathlib import Path
>>> resolve_home("/tmp/ck") == Path("/tmp/ck")
True
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs

from curvekit.errors import CurvekitError, StoreError
from curvekit.names import check_home_path

__all__ = ["ENV_HOME", "confined", "downloads_dir", "read_json", "real_home", "resolve_home"]

ENV_HOME = "CURVEKIT_HOME"
_CHOOSE = "choose another home (--home or $CURVEKIT_HOME)"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Return the curvekit home directory (not created).

    Examples
    --------
    >>> resolve_home("~/data/curvekit").name
    'curvekit'
    """
    # DuckDB and polars read the store by path: refuse a path they would misread.
    if home is not None:
        return check_home_path(home, StoreError)
    env = os.environ.get(ENV_HOME)
    if env:
        return check_home_path(env, StoreError)
    return check_home_path(platformdirs.user_data_dir("curvekit", appauthor=False), StoreError)


def real_home(home: Path) -> Path:
    """The folder ``home`` names once its links are followed: where curvekit's files are.

    Refused, with a :class:`StoreError` naming the path: a loop of links, and a home whose
    nearest existing part is not a folder (a file, or a link that leads nowhere), where
    making the home would create something other than the folder the path names.

    >>> import tempfile
    >>> top = Path(tempfile.mkdtemp())
    >>> (top / "ck").symlink_to(top / "elsewhere")
    >>> real_home(top / "ck")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curvekit.errors.StoreError: the curvekit home .../ck is a symbolic link to .../elsewhere, ...
    """
    try:
        real = home.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a loop (Python < 3.13)
        raise StoreError(f"the curvekit home {home} cannot be followed to a folder: its "
                         f"symbolic links form a loop ({exc}); remove the loop or {_CHOOSE}"
                         ) from None
    probe = home
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    if probe.is_dir():
        return real
    where = f"the curvekit home {home}" + ("" if probe == home else f" lies under {probe}, which")
    if probe.is_symlink():
        raise StoreError(f"{where} is a symbolic link to {probe.resolve()}, which does not "
                         f"exist; create that folder, remove the link, or {_CHOOSE}")
    raise StoreError(f"{where} is a file, not a folder; move the file away or {_CHOOSE}")


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def confined(home: Path, path: Path, *, fix: str = "") -> Path:
    """``path`` (a path below ``home``), once checked to stay inside the home.

    Every part of ``path`` below the home that exists and is a symbolic link must lead to a
    place inside the home (a link to nothing there is fine: what curvekit then creates is
    inside). A link leading outside it, or into a loop, is a :class:`StoreError` naming the
    link, where it leads, and the fix (``fix``, where ``{link}`` stands for the link's
    path; by default: remove the link); nothing is touched.
    Parts that do not exist yet end the check: curvekit creates them where the path says.

    >>> import tempfile
    >>> top = Path(tempfile.mkdtemp())
    >>> (top / "home").mkdir(); (top / "home" / "stores").symlink_to(top)
    >>> confined(top / "home", top / "home" / "stores" / "x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curvekit.errors.StoreError: .../home/stores is a symbolic link to ..., outside the ...
    >>> confined(top / "home", top / "home" / "downloads" / "a.tar").name
    'a.tar'
    """
    root = real_home(home)
    here = home
    fix = fix or "remove the link (`rm {link}`) and run again"
    for part in path.relative_to(home).parts:
        here = here / part
        if not here.is_symlink():
            if not os.path.lexists(here):
                break
            continue
        try:
            target = here.resolve()
        except (OSError, RuntimeError) as exc:
            raise StoreError(f"{here} is a symbolic link that leads round in a loop ({exc}); "
                             f"curvekit touched nothing. To fix: "
                             f"{fix.replace('{link}', str(here))}") from None
        if not _inside(target, root):
            raise StoreError(
                f"{here} is a symbolic link to {target}, outside the curvekit home {root}: "
                "curvekit creates, writes and removes files only inside its own home, so it "
                f"touched nothing. To fix: {fix.replace('{link}', str(here))}")
    return path


def downloads_dir(home: Path) -> Path:
    """Directory under ``home`` where downloaded archives are kept (checked by
    :func:`confined`: a ``downloads`` link leading outside the home is refused).

    ``fetch`` writes only directly inside it, under the manifest's bare ``archive.file_name``.

    >>> downloads_dir(Path("/tmp/ck")).as_posix()
    '/tmp/ck/downloads'
    """
    return confined(home, home / "downloads")


def read_json(path: Path, damaged: Callable[[str], CurvekitError]) -> Any:
    """The JSON value of ``path``, a file curvekit wrote into its home.

    A file that cannot be read, is not UTF-8, is not JSON, or nests deeper than Python's
    parser can follow (``[[[[…`` 100,000 deep) raises ``damaged(problem)``, the caller's
    error naming the file and its fix; a missing file raises :class:`FileNotFoundError`.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "x.json"
    >>> _ = path.write_text("[" * 100_000)
    >>> read_json(path, lambda problem: StoreError(f"x.json: {problem}"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curvekit.errors.StoreError: x.json: it nests deeper than ... levels, more than curvekit reads
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise damaged(f"it cannot be read ({exc})") from None
    return parse_json(text, damaged)


def parse_json(text: str, damaged: Callable[[str], CurvekitError]) -> Any:
    """``json.loads(text)``, with every way it fails turned into ``damaged(problem)``.

    >>> parse_json('{"a": 1}', StoreError)
    {'a': 1}
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise damaged(f"it nests deeper than {sys.getrecursionlimit()} levels, more than "
                      "curvekit reads") from None
    except ValueError as exc:  # JSONDecodeError, and integers past Python's digit limit
        raise damaged(f"it is not JSON ({exc})") from None

