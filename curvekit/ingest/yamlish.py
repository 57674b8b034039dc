"""Read the small flat YAML files training tools write (``meta.yaml``, ``hparams.yaml``).

PyYAML is used when it is installed. Without it, a fallback reads the flat
``key: value`` lines these files hold at the top level (nested blocks are skipped), which is
all curvekit needs from them.

>>> parse_flat("run_id: abc\\nstatus: 3\\nlr: 0.1\\nname: 'x y'\\nnested:\\n  a: 1\\n")
{'run_id': 'abc', 'status': 3, 'lr': 0.1, 'name': 'x y', 'nested': None}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curvekit.errors import IngestError

__all__ = ["parse_flat", "read_flat_yaml", "scalar"]


def scalar(text: str) -> Any:
    """A YAML-ish scalar from text: int, float, bool, None or the string itself.

    >>> [scalar(t) for t in ["3", "0.1", "1e-3", "true", "null", "sgd", "'7'"]]
    [3, 0.1, 0.001, True, None, 'sgd', '7']
    """
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "~", ""):
        return None
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    return t


def parse_flat(text: str) -> dict[str, Any]:
    """The top-level ``key: value`` pairs of a YAML document (the no-PyYAML fallback)."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or line[0] in " \t-":
            continue
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = scalar(value.split(" #", 1)[0])
    return out


def read_flat_yaml(path: Path) -> dict[str, Any]:
    """Read a small YAML mapping; PyYAML if installed, else :func:`parse_flat`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise IngestError(f"cannot read: {exc}", path=str(path)) from exc
    try:
        import yaml
    except ImportError:
        return parse_flat(text)
    try:
        obj = yaml.safe_load(text)
    except yaml.YAMLError:
        # e.g. Lightning's hparams.yaml tags Python objects (!!python/...), which safe_load
        # refuses: the flat scalar keys are still worth reading.
        return parse_flat(text)
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise IngestError(f"expected a YAML mapping, got {type(obj).__name__}", path=str(path))
    return {str(k): v for k, v in obj.items()}
