"""Read the small flat YAML files training tools write (``meta.yaml``, ``hparams.yaml``),
and the one typing rule for metaparameters of every format.

PyYAML is used when it is installed. Without it, a fallback reads the flat
``key: value`` lines these files hold at the top level (nested blocks are skipped), which is
all curvekit needs from them.

**Metaparameters, one rule** (:func:`param_value`), whatever the log: integers stay
integers (TensorBoard's hparams plugin stores every number as a double, so a whole
``512.0`` from it is ``512``; a YAML or MLflow ``512`` is ``512``, ``0.5`` is ``0.5``);
``true``/``false`` are booleans; a Python object is stored as the text of its qualified
name, never constructed: PyTorch Lightning's ``hparams.yaml`` tags such as
``!!python/object:torch.nn.modules.loss.MSELoss`` (with its state below it) or
``!!python/name:torch.optim.adam.Adam`` become ``torch.nn.modules.loss.MSELoss`` and
``torch.optim.adam.Adam``, and so does the text ``<class 'torch.optim.adam.Adam'>`` that
TensorBoard's hparams hold for a class; ``!!python/tuple`` is a list.

>>> parse_flat("run_id: abc\\nstatus: 3\\nlr: 0.1\\nname: 'x y'\\nnested:\\n  a: 1\\n")
{'run_id': 'abc', 'status': 3, 'lr': 0.1, 'name': 'x y', 'nested': None}
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from curvekit import structured
from curvekit.errors import IngestError
from curvekit.ingest.files import SourceFiles, files_of

__all__ = ["param_value", "parse_flat", "read_flat_yaml", "scalar"]

_CLASS_TEXT = re.compile(r"^<class '([\w.]+)'>$")
_PYTHON_TAG = re.compile(r"^!!python/(?:object(?:/new|/apply)?|name|module):([\w.]+)")


def param_value(value: Any, *, doubles: bool = False) -> Any:
    """A metaparameter by the one rule (module docs); ``doubles`` for a source that stores
    every number as a float64 (TensorBoard's hparams), whose whole values are integers.

    >>> param_value(512.0, doubles=True), param_value(0.5, doubles=True), param_value(512.0)
    (512, 0.5, 512.0)
    >>> param_value("<class 'torch.optim.adam.Adam'>")
    'torch.optim.adam.Adam'
    """
    if isinstance(value, float) and doubles and math.isfinite(value) \
            and value == int(value) and abs(value) < 2**53:
        return int(value)
    if isinstance(value, str):
        match = _CLASS_TEXT.match(value.strip()) or _PYTHON_TAG.match(value.strip())
        if match:
            return match.group(1)
    return value


def scalar(text: str) -> Any:
    """A YAML-ish scalar from text: int, float, bool, None or the string itself.

    >>> [scalar(t) for t in ["3", "0.1", "1e-3", "true", "null", "sgd", "'7'"]]
    [3, 0.1, 0.001, True, None, 'sgd', '7']
    >>> scalar("!!python/object:torch.nn.modules.loss.MSELoss")
    'torch.nn.modules.loss.MSELoss'
    """
    t = text.strip()
    tagged = _PYTHON_TAG.match(t)
    if tagged:
        return tagged.group(1)
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


def read_flat_yaml(path: Path, *, files: SourceFiles | None = None) -> dict[str, Any]:
    """Read a small YAML mapping (through ``files``, the source's files: see
    :mod:`curvekit.ingest.files`); PyYAML if installed, else :func:`parse_flat`."""
    text = files_of(path, files).read_text(path)
    try:
        import yaml
    except ImportError:
        return parse_flat(text)
    try:
        # The one loader of users' structured files: nesting, a date, the top level's type.
        checked = structured.loads(
            text, "yaml", where=str(path), expect=dict, yaml_loader=_loader(yaml),
            error=lambda message, line: IngestError(message.removeprefix(f"{path}: "),
                                                    path=str(path), line=line))
    except IngestError as exc:
        if isinstance(exc.__cause__, yaml.YAMLError):
            return parse_flat(text)  # the flat scalar keys are still worth reading
        raise
    return {str(k): v for k, v in checked.items()}


_LOADERS: dict[int, Any] = {}


def _loader(yaml: Any) -> Any:
    """PyYAML's SafeLoader, plus Python tags read as text (:func:`param_value`): nothing is
    imported or constructed, and the state below an object's tag is skipped."""
    cached = _LOADERS.get(id(yaml))
    if cached is not None:
        return cached

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        pass

    def python(loader: Any, suffix: str, node: Any) -> Any:
        kind, _, name = suffix.partition(":")
        if kind == "tuple":
            return loader.construct_sequence(node, deep=True)
        if name:
            return name
        if isinstance(node, yaml.ScalarNode):  # !!python/str, /int, /float, /bool, /none
            return scalar(str(loader.construct_scalar(node)))
        return f"!!python/{suffix}"

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", python)
    _LOADERS[id(yaml)] = Loader
    return Loader
