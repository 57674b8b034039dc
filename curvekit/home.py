"""Where curvekit keeps its downloads and its store.

The home directory is, in order of precedence: an explicit path, the ``CURVEKIT_HOME``
environment variable, or the platform's user data directory (via platformdirs).

>>> from pathlib import Path
>>> resolve_home("/tmp/ck") == Path("/tmp/ck")
True
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from curvekit.errors import StoreError
from curvekit.names import check_home_path

__all__ = ["ENV_HOME", "downloads_dir", "resolve_home"]

ENV_HOME = "CURVEKIT_HOME"


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


def downloads_dir(home: Path) -> Path:
    """Directory under ``home`` where downloaded archives are kept.

    ``fetch`` writes only directly inside it, under the manifest's bare ``archive.file_name``.

    >>> downloads_dir(Path("/tmp/ck")).as_posix()
    '/tmp/ck/downloads'
    """
    return home / "downloads"
