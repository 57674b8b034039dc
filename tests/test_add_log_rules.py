"""The rules every format goes through, on generated look-alikes of logs from the wild.

Each test writes logs the way a real library does (TensorBoard's own writers, the ``csv``
module) and checks one rule at its choke point: units of error rates
(:func:`curvekit.ingest.metrics.apply_map`), rows that share a step
(:func:`curvekit.ingest.runs.merge_rows` and ``--on-conflict``), and the import plan that
``curvekit add --dry-run`` prints (:func:`curvekit.ingest.plan.add_plan`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest.add import build
from curvekit.ingest.metrics import apply_map

NAME = "my_data/cnn/adam"


def _manifest(folder: Path, batch_size: int = 32, **workload: object) -> Path:
    path = folder / "runs.toml"
    table = "".join(f"{k} = {v!r}\n" for k, v in workload.items())
    path.write_text((f"[workload]\n{table}" if table else "")
                    + f'[[runs]]\nrun = "*"\nbatch_size = {batch_size}\n')
    return path


def _scalars(folder: Path, scalars: dict[str, list[tuple[int, float]]]) -> None:
    """Scalars as ``SummaryWriter.add_scalar`` and ``tf.summary.scalar`` write them."""
    summary = pytest.importorskip("tensorboard.summary")
    writer = summary.Writer(str(folder))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step=step)
    writer.close()


# ---------------------------------------------------------------------- units
def test_a_tensorboard_accuracy_in_percent_is_divided_by_100(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _scalars(logs / "run", {"Accuracy/test": [(100, 61.5), (200, 98.25)],
                            "Loss/test": [(100, 1.2), (200, 0.1)]})
    with pytest.warns(IngestWarning, match=r"'Accuracy/test'.*percent.*--map"):
        data = build(logs, name=NAME, manifest=_manifest(tmp_path))
    table = pl.from_arrow(next(iter(data.measurements.values())))
    assert isinstance(table, pl.DataFrame)
    assert table.get_column("test/classification_error").to_list() == pytest.approx(
        [0.385, 0.0175])


@pytest.mark.parametrize("bad", [-0.5, 100.5, 250.0])
def test_an_accuracy_outside_0_to_100_is_refused_with_the_map(tmp_path: Path,
                                                               bad: float) -> None:
    (tmp_path / "run.csv").write_text(f"step,val_acc\n100,0.5\n200,{bad}\n")
    with pytest.raises(IngestError) as info:
        build(tmp_path / "run.csv", name=NAME, manifest=_manifest(tmp_path))
    assert "'val_acc'" in str(info.value) and "--map 'val_acc=val_acc'" in str(info.value)
    # the fix named works: the column keeps its own name and its values
    data = build(tmp_path / "run.csv", name=NAME, manifest=_manifest(tmp_path),
                 metric_map=["val_acc=val_acc"])
    assert next(iter(data.measurements.values())).column("val_acc").to_pylist() == [0.5, bad]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=20),
       st.sampled_from(["val_acc", "accuracy", "test/top1", "val_error", "err_train"]))
def test_a_stored_error_rate_lies_between_0_and_1(values: list[float], name: str) -> None:
    frame = pl.DataFrame({"step": list(range(len(values))), name: values})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        mapped = apply_map(frame, "step", "run.csv")
    (column,) = [c for c in mapped.frame.columns if c != "step"]
    assert column.endswith("/classification_error")
    stored = mapped.frame.get_column(column).to_list()
    assert all(0.0 <= v <= 1.0 for v in stored)
    scale = 100.0 if max(values) > 1 else 1.0
    accuracy = "acc" in name or "top1" in name
    expected = [(1 - v / scale) if accuracy else v / scale for v in values]
    assert stored == pytest.approx(expected)
    assert ("percent" in mapped.transforms.get(column, "")) == (scale == 100.0)
