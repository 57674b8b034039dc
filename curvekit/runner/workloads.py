"""Built-in data sets and models for the runner (needs torch: ``pip install -e ".[train]"``).

Data sets, each split into train / validation / test once, the same way every time:

* ``digits``: scikit-learn's bundled 8×8 handwritten digits (1,797 images, no download):
  1,197 train, 400 validation, 200 test, from a fixed shuffle; pixels scaled to [0, 1].
* ``mnist``, ``fashion_mnist``: the paper's split, 55,000 train and the first 5,000 of the
  60,000 training images as validation, 10,000 test; read by torchvision from ``data_dir``
  (never downloaded here).
* ``cifar_10``: 45,000 train, the last 5,000 training images as validation, 10,000 test.
* ``package.module:function``: your own; the function returns a mapping with ``train``,
  ``val`` and optionally ``test``, each ``(inputs, integer labels)`` as arrays or tensors.

Models: ``fc_<widths>`` (ReLU), ``simple_cnn_{base,narrow,wide}``, each with an optional
``_bn`` suffix (batch norm before every hidden ReLU), or ``package.module:function`` called
as ``function(input_shape, num_classes)`` and returning a ``torch.nn.Module`` that maps a
batch of inputs to class logits.

**Ghost batch norm** (Hoffer et al. 2017; Goyal et al. 2017's per-worker statistics):
:func:`use_ghost_batch_norm` makes every batch-norm layer of a model normalize each
consecutive chunk of ``ghost_batch_size`` examples of a training batch with that chunk's own
mean and variance, as if each chunk were one worker's batch, so the normalization does not
change as the total batch grows. Evaluation uses the running statistics as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from curvekit.errors import RunError
from curvekit.runner.names import (
    BATCH_NORM_SUFFIX,
    SIMPLE_CNNS,
    canonical_dataset,
    canonical_model,
    is_entry_point,
    load_entry_point,
)

__all__ = ["GhostBatchNorm", "Splits", "build_model", "load_dataset", "use_ghost_batch_norm"]

DIGITS_SPLIT = (400, 200)  # validation, test; the rest (1,197) is the training set


@dataclass(frozen=True)
class Splits:
    """A data set as tensors: ``splits`` maps ``train``/``val``/``test`` to (x, y)."""

    name: str
    splits: dict[str, tuple[torch.Tensor, torch.Tensor]]
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one example."""
        return tuple(self.splits["train"][0].shape[1:])

    @property
    def n_train(self) -> int:
        """Training-set size (the full-batch batch size)."""
        return int(self.splits["train"][0].shape[0])

    def to(self, device: torch.device) -> Splits:
        """The same data on ``device``."""
        return Splits(self.name, {k: (x.to(device), y.to(device))
                                  for k, (x, y) in self.splits.items()}, self.num_classes)


def _digits() -> Splits:
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise RunError("the digits data set comes with scikit-learn: "
                       'pip install -e ".[train]"') from exc
    data = load_digits()
    order = np.random.RandomState(0).permutation(len(data.target))
    x = torch.tensor(data.images[order] / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(data.target[order], dtype=torch.int64)
    n_val, n_test = DIGITS_SPLIT
    return Splits("digits", {"train": (x[n_val + n_test:], y[n_val + n_test:]),
                             "val": (x[:n_val], y[:n_val]),
                             "test": (x[n_val:n_val + n_test], y[n_val:n_val + n_test])}, 10)


def _standardize(train: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
    dims = [0, *range(2, train.dim())]
    mean = train.mean(dim=dims, keepdim=True)
    std = train.std(dim=dims, keepdim=True).clamp_min(1e-6)
    return [(t - mean) / std for t in (train, *others)]


def _torchvision(name: str, data_dir: Path) -> Splits:
    try:
        import torchvision
    except ImportError as exc:
        raise RunError(f"the {name} data set is read with torchvision: pip install torchvision "
                       f"and put the files under {data_dir} (or pass --data-dir)") from exc
    cls = {"mnist": torchvision.datasets.MNIST,
           "fashion_mnist": torchvision.datasets.FashionMNIST,
           "cifar_10": torchvision.datasets.CIFAR10}[name]
    try:
        train_set = cls(str(data_dir), train=True, download=False)
        test_set = cls(str(data_dir), train=False, download=False)
    except RuntimeError as exc:
        raise RunError(f"{name} is not under {data_dir}: {exc}. Download it once with "
                       f"torchvision (download=True) into that folder, or pass --data-dir; "
                       "curvekit does not download it") from exc

    def tensors(ds: Any) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.as_tensor(np.asarray(ds.data), dtype=torch.float32) / 255.0
        x = x.permute(0, 3, 1, 2) if x.dim() == 4 else x.unsqueeze(1)
        return x.contiguous(), torch.as_tensor(np.asarray(ds.targets), dtype=torch.int64)

    (x, y), (xt, yt) = tensors(train_set), tensors(test_set)
    # The paper holds out 5,000 training images: the first for MNIST and Fashion MNIST
    # (TensorFlow's reader), the last for CIFAR-10.
    val = slice(0, 5000) if name != "cifar_10" else slice(len(x) - 5000, len(x))
    keep = torch.ones(len(x), dtype=torch.bool)
    keep[val] = False
    train_x, val_x, test_x = _standardize(x[keep], x[val], xt)
    return Splits(name, {"train": (train_x, y[keep]), "val": (val_x, y[val]),
                         "test": (test_x, yt)}, 10)


def _user_dataset(spec: str) -> Splits:
    loaded = load_entry_point(spec)()
    if not isinstance(loaded, Mapping) or "train" not in loaded or "val" not in loaded:
        raise RunError(f"{spec} must return a mapping with 'train', 'val' (and optionally "
                       f"'test'), each (inputs, labels); got {type(loaded).__name__}")
    splits: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for split in ("train", "val", "test"):
        if split not in loaded:
            continue
        x, y = loaded[split]
        splits[split] = (torch.as_tensor(np.asarray(x), dtype=torch.float32),
                         torch.as_tensor(np.asarray(y), dtype=torch.int64))
    num_classes = int(max(int(y.max()) for _, y in splits.values()) + 1)
    return Splits(spec, splits, int(loaded.get("num_classes", num_classes)))


def load_dataset(name: str, data_dir: str | Path | None = None) -> Splits:
    """Load a data set by name (see the module docstring), on the CPU."""
    name = canonical_dataset(name)
    if name == "digits":
        return _digits()
    if is_entry_point(name):
        return _user_dataset(name)
    return _torchvision(name, Path(data_dir or "data").expanduser())


class SimpleCNN(nn.Module):
    """The paper's simple CNN: two 5×5 same-padded conv + 2×2 max-pool blocks, one dense
    ReLU layer, then the logits."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int,
                 widths: tuple[int, int, int], batch_norm: bool = False) -> None:
        super().__init__()
        c1, c2, dense = widths
        channels, height, width = input_shape

        def norm(layer: nn.Module, size: int, kind: type[nn.Module]) -> list[nn.Module]:
            return [layer, kind(size)] if batch_norm else [layer]

        self.features = nn.Sequential(
            *norm(nn.Conv2d(channels, c1, 5, padding=2), c1, nn.BatchNorm2d), nn.ReLU(),
            nn.MaxPool2d(2),
            *norm(nn.Conv2d(c1, c2, 5, padding=2), c2, nn.BatchNorm2d), nn.ReLU(),
            nn.MaxPool2d(2), nn.Flatten())
        flat = c2 * (height // 4) * (width // 4)
        self.head = nn.Sequential(*norm(nn.Linear(flat, dense), dense, nn.BatchNorm1d),
                                  nn.ReLU(), nn.Linear(dense, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.features(x))
        return out


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Build a model by name (see the module docstring), with torch's default init."""
    name = canonical_model(name)
    if is_entry_point(name):
        model = load_entry_point(name)(input_shape, num_classes)
        if not isinstance(model, nn.Module):
            raise RunError(f"{name} must return a torch.nn.Module, got "
                           f"{type(model).__name__}")
        return model
    batch_norm = name.endswith(BATCH_NORM_SUFFIX)
    name = name.removesuffix(BATCH_NORM_SUFFIX)
    if name.startswith("simple_cnn_"):
        if len(input_shape) != 3 or min(input_shape[1:]) < 4:
            raise RunError(f"{name} needs image inputs (channels, height, width) of at least "
                           f"4×4, got examples of shape {input_shape}; use an fc_ model")
        return SimpleCNN(input_shape, num_classes, SIMPLE_CNNS[name.removeprefix("simple_cnn_")],
                         batch_norm)
    widths = [int(w) for w in name.split("_")[1:]]
    layers: list[nn.Module] = [nn.Flatten()]
    size = int(np.prod(input_shape))
    for w in widths:
        layers += [nn.Linear(size, w), *([nn.BatchNorm1d(w)] if batch_norm else []), nn.ReLU()]
        size = w
    layers.append(nn.Linear(size, num_classes))
    return nn.Sequential(*layers)


class GhostBatchNorm(nn.Module):
    """A batch-norm layer that, in training, normalizes each chunk of ``ghost_batch_size``
    examples with the chunk's own statistics (see the module docstring).

    It wraps the original layer and shares its weight, bias and running statistics. The
    running statistics move once per batch, towards the mean over chunks of each chunk's
    mean and (unbiased) variance, so their time constant stays the plain layer's. With a
    ghost batch size at least the batch size it is exactly the plain layer.
    """

    def __init__(self, layer: nn.modules.batchnorm._BatchNorm, ghost_batch_size: int) -> None:
        super().__init__()
        self.layer = layer
        self.ghost_batch_size = ghost_batch_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bn = self.layer
        if not self.training or x.shape[0] <= self.ghost_batch_size:
            out: torch.Tensor = bn(x)
            return out
        chunks = torch.split(x, self.ghost_batch_size)
        dims = [0, *range(2, x.dim())]
        outputs = [F.batch_norm(c, None, None, bn.weight, bn.bias, True, 0.0, bn.eps)
                   for c in chunks]
        if bn.track_running_stats and bn.running_mean is not None:
            assert bn.running_var is not None and bn.num_batches_tracked is not None
            with torch.no_grad():
                bn.num_batches_tracked.add_(1)
                momentum = (1.0 / float(bn.num_batches_tracked) if bn.momentum is None
                            else bn.momentum)
                mean = torch.stack([c.mean(dim=dims) for c in chunks]).mean(dim=0)
                var = torch.stack([c.var(dim=dims, unbiased=True) for c in chunks]).mean(dim=0)
                bn.running_mean.lerp_(mean, momentum)
                bn.running_var.lerp_(var, momentum)
        return torch.cat(outputs)


def use_ghost_batch_norm(model: nn.Module, ghost_batch_size: int) -> int:
    """Swap every batch-norm layer of ``model`` for a :class:`GhostBatchNorm`, in place.

    Returns how many layers were swapped; a model without batch norm is refused with
    :class:`RunError` (a ghost batch size would change nothing there).
    """
    swapped = 0
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, nn.modules.batchnorm._BatchNorm):
                setattr(parent, child_name, GhostBatchNorm(child, ghost_batch_size))
                swapped += 1
    if not swapped:
        raise RunError(f"ghost batch size {ghost_batch_size}: the model has no batch-norm "
                       "layer to apply it to; use a model with batch norm (e.g. fc_128_128_bn "
                       "or simple_cnn_base_bn) or drop --ghost-batch-size")
    return swapped
