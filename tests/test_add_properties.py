"""Invariants of the import: metric-name mapping is idempotent, and the order of runs,
manifest entries and rows never changes what is stored."""

from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import IngestError
from curvekit.ingest.add import build
from curvekit.ingest.metrics import KINDS, SPLITS, target
from curvekit.ingest.runs import merge_rows
from curvekit.store.update import content_hash, validate

_kind_words = st.sampled_from(sorted(KINDS))
_split_words = st.sampled_from([*sorted(SPLITS), ""])
_separator = st.sampled_from(["/", "_", "-", ".", " "])


@given(split=_split_words, kind=_kind_words, sep=_separator, prefix=st.booleans(),
       upper=st.booleans())
def test_mapping_is_idempotent(split: str, kind: tuple[str, ...], sep: str, prefix: bool,
                               upper: bool) -> None:
    words = list(kind)
    if split:
        words = [split, *words] if prefix else [*words, split]
    name = sep.join(words)
    name = name.upper() if upper else name
    new, complement = target(name)
    assert new.split("/")[0] in ("train", "val", "test")
    assert new.split("/")[1] in ("cross_entropy_error", "classification_error",
                                 "average_precision", "loss")
    assert complement == (KINDS[kind][1])
    assert target(new) == (new, False)  # a mapped name maps to itself
    # a loss is the cross-entropy only where the run says so; a name that says so is one
    said = target(name, cross_entropy=True)[0]
    assert said.split("/")[1] == ("cross_entropy_error" if new.endswith("/loss")
                                  else new.split("/")[1])
    assert target(said, cross_entropy=True) == (said, False)


@settings(max_examples=50)
@given(st.text(min_size=1, max_size=20))
def test_unknown_names_are_kept(name: str) -> None:
    new, complement = target(name)
    assert (new, complement) == (name, False) or target(new) == (new, False)


_runs = st.lists(
    st.tuples(st.sampled_from([8, 16, 32]),
              st.lists(st.tuples(st.integers(0, 10_000),
                                 st.floats(0, 3, allow_nan=False, width=32),
                                 st.one_of(st.none(), st.floats(0, 1, width=32))),
                       min_size=1, max_size=12, unique_by=lambda r: r[0])),
    min_size=1, max_size=5)


def _write(folder: Path, runs: list[tuple[int, list[tuple[int, float, float | None]]]],
           rng: random.Random | None) -> Path:
    entries = []
    for i, (bs, rows) in enumerate(runs):
        lines = []
        for step, loss, acc in rows:  # Lightning-style: train and val on separate rows
            lines.append(f"{step},{loss!r},")
            if acc is not None:
                lines.append(f"{step},,{acc!r}")
        if rng is not None:
            rng.shuffle(lines)
        (folder / f"run{i}.csv").write_text("step,train_loss,val_acc\n" + "\n".join(lines)
                                            + "\n")
        entries.append(f'[[runs]]\nrun = "run{i}.csv"\nbatch_size = {bs}\n'
                       f"parameters = {{ learning_rate = {0.1 * (i + 1)!r} }}\n")
    if rng is not None:
        rng.shuffle(entries)
    (folder / "m.toml").write_text("".join(entries))
    return folder / "m.toml"


@settings(max_examples=25, deadline=None)
@given(runs=_runs, seed=st.integers(0, 2**32 - 1))
def test_order_of_runs_and_rows_does_not_matter(
        runs: list[tuple[int, list[tuple[int, float, float | None]]]], seed: int) -> None:
    hashes = set()
    for rng in (None, random.Random(seed)):
        with tempfile.TemporaryDirectory() as tmp:
            manifest = _write(Path(tmp), runs, rng)
            data = build(Path(tmp), name="prop/mlp/sgd", manifest=manifest)
            hashes.add(content_hash(data, validate(data)))
            total = sum(t.num_rows for t in data.measurements.values())
            assert total == sum(len(rows) for _, rows in runs)
    assert len(hashes) == 1


_cell = st.one_of(st.none(), st.sampled_from([0.5, 1.0, 2.0, math.nan, math.inf]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), _cell, _cell), min_size=1, max_size=14))
def test_merge_rows_matches_a_plain_reading(rows: list[tuple[int, float | None,
                                                             float | None]]) -> None:
    """One row per step, each metric's value the one its rows agree on; rows that disagree
    (NaN equals NaN) are refused, naming the first such step."""
    frame = pl.DataFrame({"step": [r[0] for r in rows], "a": [r[1] for r in rows],
                          "b": [r[2] for r in rows]},
                         schema={"step": pl.Float64, "a": pl.Float64, "b": pl.Float64})
    expected: dict[int, dict[str, float | None]] = {}
    clash = None
    for step in sorted({r[0] for r in rows}):
        expected[step] = {}
        for column, index in (("a", 1), ("b", 2)):
            values = [r[index] for r in rows if r[0] == step and r[index] is not None]
            distinct = {"nan" if math.isnan(v) else v for v in values}
            if len(distinct) > 1 and clash is None:
                clash = (step, column)
            expected[step][column] = values[0] if values else None
    if clash is not None:
        with pytest.raises(IngestError, match=f"step {clash[0]} appears twice with "
                           f"different '{clash[1]}' values"):
            merge_rows(frame, "log.csv", lambda row: row + 2)
        return
    merged = merge_rows(frame, "log.csv", lambda row: row + 2)
    assert merged.get_column("step").to_list() == list(expected)
    for column in ("a", "b"):
        got = merged.get_column(column).to_list()
        want = [expected[s][column] for s in expected]
        assert [("nan" if v is not None and math.isnan(v) else v) for v in got] == \
            [("nan" if v is not None and math.isnan(v) else v) for v in want]
