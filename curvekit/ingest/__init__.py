"""Import training runs of one's own as a workload of the store (``curvekit add``).

One module per log format reads runs into :class:`~curvekit.ingest.runs.RunLog` objects
(``release``, ``csvlogs``, ``tensorboard``, ``mlflow`` with ``mlflow_sqlite``, ``wandb``
with ``wandb_local``, ``algoperf``, ``hf`` for Hugging Face Trainer logs, ``sacred``,
``dvclive``, ``timm``, ``ultralytics``, ``jsonlines``; TensorBoard's records are read
through ``tfrecord``, nested configurations become metaparameters in ``configs``);
``files`` is the one door through which they all list and open a source's
files (regular files inside it, no links followed); ``select`` chooses the files a source
folder contributes; ``manifest`` reads the
run manifest that supplies batch sizes and metaparameters, ``metrics`` maps metric names onto
the release's ``<split>/<metric>`` convention, ``status`` decides each run's status, and
``add`` checks everything and hands one :class:`~curvekit.store.update.WorkloadData` to the
store.
"""

from __future__ import annotations

__all__ = ["FORMATS"]

FORMATS: tuple[str, ...] = ("auto", "release", "csv", "tensorboard", "mlflow", "wandb",
                            "algoperf", "hf", "sacred", "dvclive", "timm", "ultralytics",
                            "jsonl")
"""The log formats ``curvekit add`` reads (``auto``: detect from the files)."""
