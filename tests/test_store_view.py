"""The ``measurements`` view of format 3 (docs/store.md, "The measurements view and the
index of files"): the union of one scan per metric over its own files and one scan of the
shared files holds every row of the files once, whatever the names and the files."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

_NAMES = st.lists(st.sampled_from(["a", "B", "step", "metric", "value", "val/err", "VAL/ERR",
                                   "x'y", 'q"r', "é/δ", "batch_size"]),
                  unique=True, min_size=1, max_size=6)


@settings(max_examples=12, deadline=None)
@given(names=_NAMES, lengths=st.lists(st.integers(0, 30), min_size=1, max_size=4),
       group=st.integers(1, 40), branches=st.integers(0, 3), data=st.data())
def test_the_measurements_view_is_every_row_of_the_files(
        tmp_path_factory: object, names: list[str], lengths: list[int], group: int,
        branches: int, data: st.DataObject) -> None:
    """Whatever files the writer makes (own and shared, small limits standing for 65,536
    rows and 64 branches), the view holds every row of the files once, and a query of one
    metric (a value) gives that metric's rows, in any case and with any characters."""
    import duckdb
    import pyarrow as pa
    import pytest

    from curvekit.store import store as store_module
    from curvekit.store import writer

    folder = tmp_path_factory.mktemp("view")  # type: ignore[attr-defined]
    studies = []
    for i, n in enumerate(lengths):
        picked = data.draw(st.lists(st.sampled_from(names), unique=True))
        values = tuple(pa.array(data.draw(st.lists(
            st.one_of(st.none(), st.floats(allow_nan=True)), min_size=n, max_size=n)),
            pa.float64()) for _ in picked)
        studies.append((8 << i, writer.Evaluations(
            pa.array(sorted(data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))),
                     pa.int64()),
            pa.array(list(range(n)), pa.int64()), tuple(picked), values)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer, "GROUP_ROWS", group)
        written = writer.write_workload_measurements(
            studies, folder / "base_dir=b" / "model=m" / "optimizer=o")
        patch.setattr(store_module, "MAX_BRANCHES", branches)
        con = duckdb.connect()
        view = store_module.measurements_view(con, {
            str(folder / "base_dir=b" / "model=m" / "optimizer=o" / f): m
            for f, m in written.files.items()})
        view.create_view("measurements")
    files = str(folder / "**" / "*.parquet")
    plain = con.sql(f"select trial_id, step, metric, value, base_dir, batch_size, model, "
                    f"optimizer from read_parquet('{files}', hive_partitioning = true) "
                    "order by all").fetchall()
    assert con.sql("select * from measurements order by all").fetchall() == plain \
        or repr(con.sql("select * from measurements order by all").fetchall()) == repr(plain)
    for name in names:
        one = con.execute("select * from measurements where metric = ? order by all",
                          [name]).fetchall()
        assert repr(one) == repr([r for r in plain if r[2] == name])
