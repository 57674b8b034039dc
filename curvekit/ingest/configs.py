"""Metaparameters from the nested configuration files loggers keep beside a run.

Sacred's ``config.json``, DVCLive's ``params.yaml``, W&B's ``config.yaml``, Ultralytics'
``args.yaml`` and timm's ``args.yaml`` hold a run's configuration, often nested (a Hydra
config: ``data: {batch_size: 128}``, ``model: {optimizer: {lr: 0.001}}``). One rule makes
them metaparameters:

* nested tables are flattened, their keys joined with ``.`` (``data.batch_size``);
* a flattened key whose last part is the last part of no other key, and no top-level name,
  is stored under that last part alone (``data.batch_size`` -> ``batch_size``, which then
  gives the batch size; ``model.optimizer.lr`` -> ``lr``, stored as ``learning_rate``);
  parts that repeat (Hydra's ``_target_``) keep the dotted name;
* text, numbers and booleans are stored as they are (by
  :func:`~curvekit.ingest.yamlish.param_value`); a list is stored as its JSON text; a
  table that stands for one object (jsonpickle's ``{"py/object": ...}`` in Sacred's
  config) as the qualified name of its class, never constructed -- a NumPy array as the
  JSON text of its values; empty values (``null``, an empty table) are left out, and so are the keys
  ``skip`` names (a logger's own bookkeeping).

>>> flatten({"data": {"batch_size": 128, "num_workers": 0},
...          "model": {"optimizer": {"_target_": "torch.optim.Adam", "lr": 0.001},
...                    "net": {"_target_": "Net"}}, "seed": 12, "tags": ["a", "b"]})
{'batch_size': 128, 'lr': 0.001, 'model.net._target_': 'Net', \
'model.optimizer._target_': 'torch.optim.Adam', 'num_workers': 0, 'seed': 12, \
'tags': '["a", "b"]'}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from curvekit import structured
from curvekit.ingest.yamlish import param_value

__all__ = ["flatten"]

_OBJECT_KEYS = ("py/object", "py/reduce", "py/tuple", "py/set", "py/type", "py/function")


def _pickled(value: Mapping[Any, Any]) -> Any:
    """A jsonpickle object (``{"py/object": "numpy.ndarray", "values": [...]}``): a NumPy
    array as the JSON text of its values, any other object as its qualified name (never
    constructed), as Python objects in Lightning's ``hparams.yaml`` are."""
    if value.get("py/object") == "numpy.ndarray" and "values" in value:
        return structured.dumps(value["values"])
    name = next((value[k] for k in _OBJECT_KEYS if isinstance(value.get(k), str)), None)
    return name if name is not None else structured.dumps(value, sort_keys=True)


def _leaves(config: Mapping[Any, Any], prefix: tuple[str, ...], skip: frozenset[str],
            out: list[tuple[tuple[str, ...], Any]]) -> None:
    for key, value in config.items():
        name = str(key)
        if not prefix and name in skip:
            continue
        path = (*prefix, name)
        if isinstance(value, Mapping) and value and not any(k in value for k in _OBJECT_KEYS):
            _leaves(value, path, skip, out)
        elif value is None or (isinstance(value, Mapping) and not value):
            continue
        elif isinstance(value, Mapping) and value:
            out.append((path, _pickled(value)))
        elif isinstance(value, list | tuple):
            out.append((path, structured.dumps(value, sort_keys=True)))
        else:
            out.append((path, param_value(value)))


def flatten(config: Mapping[Any, Any], skip: Iterable[str] = ()) -> dict[str, Any]:
    """``config`` as flat metaparameters, by the rule of the module docs, sorted by name."""
    leaves: list[tuple[tuple[str, ...], Any]] = []
    _leaves(config, (), frozenset(skip), leaves)
    last = Counter(path[-1] for path, _ in leaves)
    top = {path[0] for path, _ in leaves if len(path) == 1}
    out: dict[str, Any] = {}
    for path, value in leaves:
        short = path[-1]
        name = short if len(path) == 1 or (last[short] == 1 and short not in top) \
            else ".".join(path)
        out[name] = value
    return dict(sorted(out.items()))
