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

__all__ = ["ENV_HOME", "downloads_dir", "resolve_home"]

ENV_HOME = "CURVEKIT_HOME"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Return the curvekit home directory (not created).

    Examples
    --------
    >>> resolve_home("~/data/curvekit").name
    'curvekit'
    """
    if home is not None:
        return Path(home).expanduser()
    env = os.environ.get(ENV_HOME)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("curvekit", appauthor=False))


def downloads_dir(home: Path) -> Path:
    """Directory under ``home`` where downloaded archives are kept.

    ``fetch`` writes only directly inside it, under the manifest's bare ``archive.file_name``.

    >>> downloads_dir(Path("/tmp/ck")).as_posix()
    '/tmp/ck/downloads'
    """
    return home / "downloads"
