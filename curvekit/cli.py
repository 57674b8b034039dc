"""The ``curvekit`` command: a thin click layer over the library.

Each command calls one library function of the same name and formats what it returns.
Output formatting lives here only; errors are caught once, at the root.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from curvekit import structured
from curvekit._exits import exit_broken_pipe, exit_interrupted
from curvekit._version import __version__
from curvekit.errors import CurvekitError, RunError
from curvekit.home import ENV_HOME
from curvekit.ingest import FORMATS
from curvekit.outputs import stdout_guard
from curvekit.progress import Progress
from curvekit.runner.limits import (
    MAX_BATCH_SIZE,
    MAX_SEED,
    MAX_STEPS,
    MAX_TRIALS,
    MAX_WORKERS,
)

if TYPE_CHECKING:
    import polars as pl

    from curvekit.selection import Selection
    from curvekit.store.store import Store

F = TypeVar("F", bound=Callable[..., Any])


class _PlanFormat(click.Choice[str]):
    """``add --format``: the plan's format (table, json); a log format is the old spelling of
    ``--log-format`` and still parses (it is left out of --help)."""

    def __init__(self) -> None:
        super().__init__(["table", "json"])

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value in FORMATS:
            return value
        return super().convert(value, param, ctx)


class AliasedOption(click.Option):
    """An option that still answers to its old spellings (``hidden_aliases``), which parse
    as before but are left out of ``--help``, error messages and docs/cli.md: a renamed
    option keeps working for a release.
    """

    def __init__(self, *args: Any, hidden_aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        unknown = set(hidden_aliases) - set(self.opts)
        if unknown:  # a typo here would silently show the alias in --help
            raise TypeError(f"hidden aliases {sorted(unknown)} are not names of {self.opts}")
        self.hidden_aliases = hidden_aliases

    @property
    def shown_opts(self) -> list[str]:
        """The option's names as --help shows them: without the hidden aliases."""
        return [o for o in self.opts if o not in self.hidden_aliases]

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        every, self.opts = self.opts, self.shown_opts
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = every

    def get_error_hint(self, ctx: click.Context | None) -> str:
        return " / ".join(f"'{o}'" for o in self.shown_opts)

home_option = click.option(
    "--home", type=click.Path(file_okay=False, path_type=Path), envvar=ENV_HOME,
    help=f"curvekit's data folder (default: ${ENV_HOME} or the platform data directory).")
format_option = click.option(
    "--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
    show_default=True, help="Output format.")
def _seconds(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if math.isnan(value):  # FloatRange lets nan through: it compares false with every bound
        raise click.BadParameter("nan is not a number of seconds: give 0 or more, or inf")
    return value


wait_option = click.option(
    "--wait", type=click.FloatRange(min=0), default=0, show_default=True, metavar="SECONDS",
    callback=_seconds,
    help="If another curvekit process is writing to the store, wait up to SECONDS for it "
         "to finish (saying so on stderr) instead of failing at once; 'inf' waits as long as "
         "it takes.")


@contextmanager
def _waiting(seconds: float) -> Iterator[None]:
    """The library's :func:`~curvekit.store.transaction.wait_for_writers` for a writing
    command's ``--wait``, its notice on stderr."""
    from curvekit.store.transaction import wait_for_writers

    with wait_for_writers(seconds, notice=lambda message: click.echo(
            f"Note: {message}.", err=True)):
        yield


class _Group(click.Group):
    """Turn every CurvekitError into ``Error: ...`` and exit status 1; Ctrl-C into
    ``Aborted.`` and 130 (click's own says "Aborted!" and 1); a reader of stdout that has
    gone (``| head``) into a quiet exit with 141."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CurvekitError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            exit_interrupted()
        except BrokenPipeError:
            exit_broken_pipe()


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="curvekit")
def main() -> None:
    """Training-curve data of Shallue et al. (2019) as a Parquet store you can query.

    Exit status: 0 done, 1 an error (printed as "Error: ..."), 2 a wrong command line,
    3 an empty answer (steps-to-result, best: stderr says why), 130 interrupted by Ctrl-C,
    141 output cut short by its reader (such as `| head`).
    """


class _PandasAbsent:
    """A finder that makes ``import pandas`` fail (see :func:`_without_pandas`)."""

    @staticmethod
    def find_spec(name: str, *args: object) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("curvekit add does not use pandas", name=name)


@contextmanager
def _without_pandas() -> Iterator[None]:
    """Keep pandas out of a command that never hands pyarrow a pandas object.

    pyarrow imports pandas (a third of a second, a sixth of an ``add``) at the first array
    it builds or converts, only to learn pandas' types; where the import fails it goes on
    without them. ``add`` reads logs into Arrow and polars, never into pandas, so while it
    runs ``import pandas`` fails. A process that has imported pandas already is unaffected
    (pyarrow finds it imported), and the finder is removed when the block ends.
    """
    if "pandas" in sys.modules:
        yield
        return
    sys.meta_path.insert(0, _PandasAbsent)
    try:
        yield
    finally:
        sys.meta_path.remove(_PandasAbsent)


def _open(home: Path | None) -> Store:
    """The store of ``home``, imported here so that commands that draw start sooner."""
    from curvekit.store.store import Store

    return Store.open(home)


TABLE_DIGITS = 6


def _readable(value: Any) -> str:
    """A table cell: floats to TABLE_DIGITS significant digits, lists space-separated."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.{TABLE_DIGITS}g}" if math.isfinite(value) else str(value)
    if isinstance(value, list):
        return " ".join(_readable(v) for v in value)
    return str(value)


def _echo(message: str = "", *, nl: bool = True) -> None:
    """Print ``message`` on stdout: every write of the CLI to stdout goes through here (or
    :func:`curvekit.outputs.stdout_guard` itself), so a full disk is an ``Error:`` line."""
    with stdout_guard():
        click.echo(message, nl=nl)


def emit(frame: pl.DataFrame, fmt: str) -> None:
    """Print a DataFrame as an aligned table, CSV or JSON records.

    The table is for reading: floats show 6 significant digits (``0.1 + 0.2`` reads
    0.3). CSV and JSON are for programs and keep every digit.
    """
    import polars as pl

    if fmt == "json":
        _echo(structured.dumps(frame.to_dicts(), indent=1, default=str))
        return
    if fmt == "csv":
        flat = frame.with_columns(
            pl.col(c).list.eval(pl.element().cast(pl.String)).list.join(" ")
            for c, t in frame.schema.items() if isinstance(t, pl.List))
        _echo(flat.write_csv(), nl=False)
        return
    for line in _table_lines(frame):
        _echo(line)


def _table_lines(frame: pl.DataFrame) -> list[str]:
    """``frame`` as the lines of an aligned table, header and rule first."""
    rows = [frame.columns] + [[_readable(v) for v in r] for r in frame.iter_rows()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(frame.columns))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


_STAGE_LABELS = {"download": "Downloading", "verify": "Checking sha256",
                 "convert": "Converting", "workloads": "Workload pages", "figures": "Figures",
                 "trials": "Training", "generate": "Generating"}
"""The bar's label of each stage of :data:`curvekit.progress.STAGES`."""


@contextmanager
def _progress(quiet: bool = False) -> Iterator[Progress | None]:
    """The :class:`~curvekit.progress.Progress` of fetch, report, run and generate-archive:
    one bar per stage, on stderr (``None`` with ``quiet``)."""
    if quiet:
        yield None
        return
    bars: dict[str, Any] = {}

    def update(stage: str, done: int, total: int | None) -> None:
        bar = bars.get(stage)
        if bar is None:
            for other in bars.values():
                other.render_finish()
            bar = bars[stage] = click.progressbar(
                length=total or 0, label=_STAGE_LABELS[stage], file=sys.stderr,
                show_pos=stage in ("convert", "trials", "generate"))
            bar.__enter__()
        if total and bar.length != total:
            bar.length = total
        bar.update(done - bar.pos)

    try:
        yield update
    finally:
        for bar in bars.values():
            bar.render_finish()


@main.command()
@home_option
@format_option
def datasets(home: Path | None, fmt: str) -> None:
    """The releases curvekit knows: size, licence, citation, URL, and whether each is in
    the store."""
    from curvekit.store.datasets import datasets as datasets_

    frame = datasets_(home)
    if fmt != "table":
        emit(frame, fmt)
        return
    for row in frame.to_dicts():
        state = (f"in the store ({row['workloads']} workloads)" if row["in_store"] else
                 f"a generated look-alike is in the store ({row['workloads']} workloads), "
                 "not the release" if row["generated"]
                 else f"not in the store: curvekit fetch --dataset {row['dataset']}")
        _echo(f"{row['dataset']}: {row['title']}")
        for label, key in (("size", "size"), ("licence", "licence"), ("citation", "citation"),
                           ("url", "url"), ("checked by", "checksum")):
            _echo(f"  {label + ':':<11} {row[key]}")
        _echo(f"  {'store:':<11} {state}")


@main.command()
@home_option
@click.option("--dataset", default="batch_science", show_default=True,
              help="The release to fetch: batch_science or pd1 (see curvekit datasets).")
@click.option("--url", help="Download from this mirror instead of the manifest's URL.")
@click.option("--archive", type=click.Path(dir_okay=False, path_type=Path),
              help="Convert an archive you already have (no download).")
@click.option("--sha256", help="Expect this sha256 instead of the manifest's.")
@click.option("--manifest", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="A manifest JSON describing the archive (e.g. a generated test archive).")
@click.option("--force", is_flag=True, help="Convert again even if the store is up to date.")
@click.option("--decompressor", type=click.Choice(["auto", "lbzip2", "indexed_bzip2", "python"]),
              default="auto", show_default=True,
              help="bzip2 decoder: auto picks lbzip2 if installed, else indexed_bzip2.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@wait_option
def fetch(home: Path | None, dataset: str, url: str | None, archive: Path | None,
          sha256: str | None, manifest: Path | None, force: bool, decompressor: str,
          quiet: bool, wait: float) -> None:
    """Download a release archive, verify it, and convert it into the store."""
    from curvekit.store.fetch import fetch as fetch_

    with _progress(quiet) as progress, _waiting(wait):
        result = fetch_(home=home, dataset=dataset, url=url, archive=archive, sha256=sha256,
                        manifest=manifest, force=force,
                        decompressor=decompressor,  # type: ignore[arg-type]
                        progress=progress)
    for note in result.notes:
        _echo(note)
    counts = result.metadata.get("counts", {})
    summary = (f"{counts.get('workloads')} workloads, {counts.get('studies')} studies, "
               f"{counts.get('trials')} trials, {counts.get('measurements')} measurements")
    if result.action == "up-to-date":
        _echo(f"Nothing to do: the store at {result.store} is up to date ({summary}). "
                   "Use --force to convert again.")
    else:
        _echo(f"Converted {result.archive} into {result.store} ({summary}).")


@main.command()
@home_option
@click.option("--manifest", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Check against this manifest instead of the one the store was built from.")
def verify(home: Path | None, manifest: Path | None) -> None:
    """Check the store against its manifest; exit 1 on any mismatch."""
    from curvekit.release.manifest import Manifest
    from curvekit.store.catalog import verify as verify_

    store = _open(home)
    report = verify_(store, Manifest.from_file(manifest) if manifest else None)
    checked = ", ".join(f"{v} {k}" for k, v in report.checked.items())
    for problem in report.problems:
        _echo(problem)
    for what in report.unchecked:
        _echo(f"Not checked: {what}.")
    if report.ok:
        _echo(f"OK: {checked} match the manifest.")
    else:
        click.echo(f"{len(report.problems)} mismatches ({checked} checked).", err=True)
        sys.exit(1)


@main.command()
@home_option
def upgrade(home: Path | None) -> None:
    """Rewrite a store of an earlier format (metrics as columns) in the current one.

    Every row, value and name is kept; the first add, remove or fetch upgrades it too.
    """
    from curvekit.store.upgrade import upgrade as upgrade_

    result = upgrade_(home)
    if result.changed:
        _echo(f"Upgraded the store ({len(result.workloads)} workloads) into {result.path}.")
    else:
        _echo(f"Nothing to do: the store at {result.path} has the current format.")


@main.command()
@home_option
@format_option
def info(home: Path | None, fmt: str) -> None:
    """Workloads in the store: batch sizes, trials by status, metrics, rows.

    The table gives each workload a block of lines that fit 100 columns, long names
    wrapped; csv and json give one row per workload with every value.
    """
    from curvekit.store.catalog import info as info_
    from curvekit.store.catalog import synthetic_note

    store = _open(home)
    note = synthetic_note(store)
    if note:  # on stderr, so that csv and json stay data only
        origins = [(i.get("origin") or {}) for i in store.metadata.get("added", {}).values()]
        archives = sorted({str(a) for a in [(store.metadata.get("source") or {}).get("archive"),
                                            *(o.get("archive") for o in origins
                                              if o.get("synthetic") is True)] if a})
        click.echo(f"Note: {note} (converted from {', '.join(archives)}).", err=True)
    frame = info_(store)
    if fmt != "table":
        emit(frame, fmt)
        return
    for line in info_lines(frame.to_dicts()):
        _echo(line)


INFO_WIDTH = 100
"""Terminal columns that every line of ``info``'s table fits in."""


def info_lines(rows: list[dict[str, Any]], width: int = INFO_WIDTH) -> list[str]:
    """``info``'s table: a summary line, then a block per workload, every line at most
    ``width`` terminal columns (names wrapped at spaces, or inside a word too wide).

    >>> row = {"workload": "demo/digits/fc/sgd", "batch_sizes": [2, 4], "studies": 2,
    ...        "trials": 5, "complete": 4, "incomplete": 0, "infeasible": 1,
    ...        "metrics": ["val/error", "train/loss"], "measurements": 1234}
    >>> print("\\n".join(info_lines([row])))
    1 workload: 2 studies, 5 trials, 1,234 measurements
    <BLANKLINE>
    demo/digits/fc/sgd
      batch sizes   2 4 (2 studies)
      trials        5: 4 complete, 0 incomplete, 1 infeasible
      measurements  1,234 rows
      metrics       val/error, train/loss
    """
    def total(column: str) -> int:
        return sum(int(r[column] or 0) for r in rows)

    lines = [f"{len(rows)} workload{'' if len(rows) == 1 else 's'}: {total('studies'):,} "
             f"studies, {total('trials'):,} trials, {total('measurements'):,} measurements"]
    for r in rows:
        lines += ["", *_wrap(r["workload"], "", "", width)]
        fields = {
            "batch sizes": f"{' '.join(map(str, r['batch_sizes'] or []))} "
                           f"({r['studies']} studies)",
            "trials": f"{r['trials']:,}: {r['complete']:,} complete, {r['incomplete']:,} "
                      f"incomplete, {r['infeasible']:,} infeasible",
            "measurements": f"{r['measurements']:,} rows",
            "metrics": ", ".join(r["metrics"] or []) or "none",
        }
        for key, value in fields.items():
            lines += _wrap(value, f"  {key:<14}", " " * 16, width)
    return [line.rstrip() for line in lines]


def _columns(text: str) -> int:
    """The terminal columns ``text`` takes: East Asian wide and full-width characters two,
    combining marks and format characters (zero-width space, ...) none, others one."""
    import unicodedata

    def one(char: str) -> int:
        if unicodedata.category(char) in ("Mn", "Me", "Cf"):
            return 0
        return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1

    return sum(map(one, text))


def _wrap(text: str, first: str, rest: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, the first starting with ``first``,
    the others with ``rest``: broken at spaces, and inside a word only where the word alone
    is wider than a line."""
    lines: list[str] = []
    line, empty = first, True  # empty: nothing of ``text`` on this line yet
    for word in text.split(" "):
        if not empty:
            if _columns(line) + 1 + _columns(word) <= width:
                line += " " + word
                continue
            lines.append(line)
            line, empty = rest, True
        for char in word:
            if not empty and _columns(line) + _columns(char) > width:
                lines.append(line)
                line = rest
            line += char
            empty = False
    lines.append(line)
    return lines


@main.command()
@click.argument("source", required=False, type=click.Path(exists=True, path_type=Path),
                help="The logs: a file or a folder of them.")
@click.option("--name", help="The workload's name: base_dir/model/optimizer "
              "(e.g. my_data/resnet_20/momentum).")
@click.option("--log-format", "fmt", type=click.Choice(FORMATS), default="auto",
              show_default=True, help="The logs' format (auto: detected from the files).")
@click.option("--run-manifest", "--manifest", "manifest", cls=AliasedOption,
              hidden_aliases=("--manifest",),
              type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Run manifest (TOML, YAML or JSON): batch sizes, metaparameters, statuses.")
@click.option("--map", "mapping", multiple=True, metavar="OLD=NEW",
              help="Store metric OLD as NEW (1-NEW: as 1 - value; OLD=: drop it); repeatable.")
@click.option("--include", "include", multiple=True, metavar="PATTERN",
              help="Read only files matching this glob (relative to SOURCE; a pattern without "
              "'/' matches a name at any depth); repeatable.")
@click.option("--exclude", "exclude", multiple=True, metavar="PATTERN",
              help="Leave out files or folders matching this glob (e.g. 'measurements.csv', "
              "'trial_3/*'); repeatable.")
@click.option("--on-conflict", type=click.Choice(["refuse", "first", "last"]), default="refuse",
              show_default=True, help="One metric logged twice at one step with different "
              "values: refuse, or keep the value logged first or last.")
@click.option("--run-column", metavar="NAME", default=None,
              help="A CSV log holding several runs one after another: the column that says "
              "which run each row belongs to (one trial per value).")
@click.option("--dry-run", is_flag=True,
              help="Print what would be imported (runs, step axis, metrics, statuses) and why; "
              "write nothing.")
@click.option("--format", "out_fmt", type=_PlanFormat(), default="table", show_default=True,
              help="The --dry-run plan's format.")
@click.option("--replace", is_flag=True, help="Overwrite a workload added before under NAME.")
@click.option("--follow-links", is_flag=True,
              help="Read through symbolic links, wherever they point (by default a link "
              "inside SOURCE is refused): for a folder of links you made yourself.")
@click.option("--example-run-manifest", "--example-manifest", "example_manifest",
              cls=AliasedOption, hidden_aliases=("--example-manifest",), is_flag=True,
              help="Print a documented run-manifest template and exit.")
@home_option
@wait_option
def add(source: Path | None, name: str | None, fmt: str, manifest: Path | None,
        mapping: tuple[str, ...], include: tuple[str, ...], exclude: tuple[str, ...],
        on_conflict: str, run_column: str | None, dry_run: bool, out_fmt: str, replace: bool,
        follow_links: bool, example_manifest: bool, home: Path | None, wait: float) -> None:
    """Add training runs of your own as a workload: release layout, CSV, TensorBoard, MLflow,
    Weights & Biases or AlgoPerf logs.

    Every input is checked before the store is touched; adding the same runs again changes
    nothing. --dry-run prints the plan instead and writes nothing.
    """
    from curvekit.ingest.add import add as add_
    from curvekit.ingest.add import add_plan
    from curvekit.ingest.manifest import EXAMPLE

    if out_fmt in FORMATS:  # ``--format csv``: the old spelling of --log-format
        if fmt not in ("auto", out_fmt):
            raise click.UsageError(f"--format {out_fmt} and --log-format {fmt} disagree; give "
                                   "the logs' format once, as --log-format")
        fmt, out_fmt = out_fmt, "table"
    elif not dry_run and out_fmt != "table":
        raise click.UsageError(f"--format {out_fmt} formats the plan of --dry-run; add "
                               "--dry-run, or leave --format out")
    if example_manifest:
        _echo(EXAMPLE, nl=False)
        return
    if source is None and manifest is None:
        raise click.UsageError("give SOURCE (the logs), --run-manifest, or "
                               "--example-run-manifest")
    from curvekit.ingest.runs import IngestWarning

    if dry_run:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", IngestWarning)
            try:
                plan = add_plan(source, name=name, format=fmt, manifest=manifest,
                                metric_map=list(mapping), include=include, exclude=exclude,
                                follow_links=follow_links, on_conflict=on_conflict,
                                run_column=run_column)
            except Exception:  # a refused plan: what the logs hold is still worth knowing
                _print_ingest_warnings(caught)
                raise
        if out_fmt == "json":
            _echo(structured.dumps(plan.as_dict(), indent=2, default=str))
        else:
            _echo(_plan_table(plan))
        return
    with warnings.catch_warnings(record=True) as caught, _waiting(wait), _without_pandas():
        warnings.simplefilter("always", IngestWarning)
        try:
            result = add_(source, name=name, format=fmt, manifest=manifest,
                          metric_map=list(mapping), replace=replace, home=home,
                          include=include, exclude=exclude, follow_links=follow_links,
                          on_conflict=on_conflict, run_column=run_column)
        finally:  # what the logs hold is worth knowing even when the import is refused
            for warning in caught:
                if issubclass(warning.category, IngestWarning):
                    click.echo(f"Warning: {warning.message}", err=True)
                else:
                    warnings.showwarning(warning.message, warning.category, warning.filename,
                                         warning.lineno)
    counts = (f"{result.studies} studies, {result.trials} trials, "
              f"{result.measurements:,} measurements")
    if result.changed:
        _echo(f"Added {result.workload} ({counts}) to the store at {result.path}.")
    else:
        _echo(f"Nothing to do: {result.workload} is already in the store with the same "
                   f"data ({counts}).")


def _print_ingest_warnings(caught: list[warnings.WarningMessage]) -> None:
    from curvekit.ingest.runs import IngestWarning

    for warning in caught:
        if issubclass(warning.category, IngestWarning):
            click.echo(f"Warning: {warning.message}", err=True)


def _plan_table(plan: Any) -> str:
    """The import plan of ``add --dry-run`` as text: one block per run, then the studies."""
    lines = [f"Plan: add {plan.workload} from {plan.source} (read as {plan.format}); "
             "nothing is written.", ""]
    for run in plan.runs:
        steps = f"steps {run.steps[0]}..{run.steps[1]}" if run.steps else "no rows"
        lines += [f"run {run.run}  ->  batch size {run.batch_size} (from "
                  f"{run.batch_size_from}), trial {run.trial_id}",
                  f"  from:    {run.path}",
                  *[f"  {'files:' if i == 0 else '':<8} {f}" for i, f in enumerate(run.files)
                    if run.files != [run.path]],
                  f"  axis:    {run.axis}: {run.axis_evidence}",
                  f"  rows:    {run.rows}, {steps}",
                  f"  status:  {run.status}: {run.status_why}"]
        for metric in run.metrics:
            stored = metric.stored or "(left out)"
            how = "" if metric.transform == "value" else f"  [{metric.transform}]"
            why = f": {metric.why}" if metric.why else ""
            lines.append(f"  metric:  {metric.logged} -> {stored}{how}{why}")
        if run.parameters:
            shown = ", ".join(f"{k}={v!r}" for k, v in run.parameters.items())
            lines.append(f"  params:  {shown}")
        lines.append("")
    for study in plan.studies:
        lines.append(f"study batch size {study.batch_size}: {study.trials} trial(s), budget "
                     f"{study.budget} steps (from {study.budget_from})")
    if plan.unused:
        lines += ["", "Files read that make no run imported (runs left out: see the notes):"]
        lines += [f"  {f}" for f in plan.unused]
    if plan.notes:
        lines += ["", "Notes:"] + [f"  - {note}" for note in plan.notes]
    return "\n".join(lines)


@main.command("generate-archive")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path),
                help="The archive to write (.tar.bz2; pd1: .tar.gz); its manifest goes beside "
                     "it.")
@click.option("--dataset", type=click.Choice(["batch_science", "pd1"]),
              default="batch_science", show_default=True,
              help="Whose layout: the release's, or PD1's (pd1.tar.gz).")
@click.option("--points", type=click.IntRange(min=1, max=100_000), default=16,
              show_default=True,
              help="pd1 only: matched phase-1 Halton points per task (PD1 has 400).")
@click.option("--workload", "workloads", multiple=True,
              help="Only this workload (base_dir/model/optimizer); repeatable. Default: all 35.")
@click.option("--trial-fraction", type=float, default=1.0, show_default=True,
              help="Fraction of the published trial counts per status.")
@click.option("--max-trials", type=click.IntRange(min=1, max=MAX_TRIALS),
              help="Cap on trials per study.")
@click.option("--evals-scale", type=float, default=1.0, show_default=True,
              help="Scale of the number of evaluation rows per trial.")
@click.option("--order", type=click.Choice(["walk", "shuffled"]), default="walk",
              show_default=True, help="Member order: like tar(1), or fully shuffled.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True,
              help="Seed of the random draws: the same seed writes the same bytes.")
@click.option("--jobs", type=click.IntRange(min=1, max=MAX_WORKERS),
              help="Worker processes (default: every CPU).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def generate_archive(path: Path, dataset: str, points: int, workloads: tuple[str, ...],
                     trial_fraction: float, max_trials: int | None, evals_scale: float,
                     order: str, seed: int, jobs: int | None, quiet: bool) -> None:
    """Write a synthetic archive in the release's exact layout, and its manifest.

    The defaults make a full-scale archive (454 studies, the published trial counts, about
    70 million evaluation rows). The manifest goes to PATH.manifest.json; convert with
    `curvekit fetch --archive PATH --manifest PATH.manifest.json`. With --dataset pd1, a
    PD1 look-alike (--points, --evals-scale, --order, --seed apply); convert with `curvekit
    fetch --dataset pd1 --archive PATH --manifest PATH.manifest.json`.
    """
    if dataset == "pd1":
        from curvekit import structured
        from curvekit.outputs import write_file
        from curvekit.release.pd1_synthetic import generate_pd1

        pd1 = generate_pd1(path, points=points, evals_scale=evals_scale, seed=seed,
                           order="shuffled" if order == "shuffled" else "published")
        target = write_file(path.with_name(path.name + ".manifest.json"),
                            structured.dumps(pd1.to_dict(), indent=1) + "\n", "the manifest")
        lines = sum(v or 0 for k, v in pd1.counts.items() if k.endswith("_lines"))
        _echo(f"Wrote {path} ({path.stat().st_size:,} bytes: {lines} trial lines) and "
              f"{target}.")
        return
    from curvekit.release.synthetic import generate_archive as generate
    from curvekit.release.synthetic import write_manifest

    with _progress(quiet) as progress:
        manifest = generate(path, workloads=list(workloads) or None,
                            trial_fraction=trial_fraction, max_trials_per_study=max_trials,
                            evals_scale=evals_scale, order=order,  # type: ignore[arg-type]
                            seed=seed, jobs=jobs, progress=progress)
    target = write_manifest(manifest, path.with_name(path.name + ".manifest.json"))
    totals = manifest.totals
    _echo(f"Wrote {path} ({path.stat().st_size:,} bytes: {totals['studies']} studies, "
               f"{totals['trials']} trials, {manifest.measurements:,} measurements) and "
               f"{target}.")


# Former names of the budget options, accepted (hidden) for a release: the library and the
# help say step_budget/--step-budget, so the command line says what the API calls it.
_ALIASES = {"step_budget": "max_steps", "example_budget": "max_examples"}


def _budget(kwargs: dict[str, Any], name: str) -> float | None:
    """The budget ``name`` from its option or its former name's, refusing two values."""
    value, old = kwargs.pop(name), kwargs.pop(_ALIASES[name])
    if value is not None and old is not None and value != old:
        new_flag, old_flag = ("--" + n.replace("_", "-") for n in (name, _ALIASES[name]))
        raise click.UsageError(f"{new_flag} {value:g} and {old_flag} {old:g} disagree; "
                               f"{old_flag} is the former name of {new_flag}: give it once")
    chosen: float | None = value if value is not None else old
    return chosen


def _selection(*, goal: str = "required", goal_help: str = "The target value of the metric.",
               statuses: tuple[str, ...] = ("COMPLETE",), optional: bool = False
               ) -> Callable[[F], F]:
    """The options that choose what a measurement reads, built into ONE Selection.

    Adds WORKLOAD, --metric, --goal (``goal``: ``required``, ``optional`` or ``none``),
    --maximize, --trials, --step-budget, --example-budget (and their hidden former names
    --max-steps, --max-examples), --status (default ``statuses``) and --home; the command
    receives ``selection`` (a :class:`curvekit.selection.Selection`) and ``home`` instead.
    ``optional`` (fit, whose --all needs none): WORKLOAD and --metric may be left out, and
    the command receives ``selection=None`` then; it also receives ``statuses`` and
    ``chosen``, the options given that select one curve.
    """

    def build(f: F) -> F:
        def command(**kwargs: Any) -> Any:
            from curvekit.selection import Selection

            workload, metric = kwargs.pop("workload"), kwargs.pop("metric")
            target = kwargs.pop("goal") if goal != "none" else None
            fields = dict(maximize=kwargs.pop("maximize"), trials=kwargs.pop("trials"),
                          step_budget=_budget(kwargs, "step_budget"),
                          example_budget=_budget(kwargs, "example_budget"),
                          statuses=kwargs.pop("statuses"))
            if optional:
                given = {"WORKLOAD": workload, "--metric": metric, "--goal": target,
                         "--maximize": fields["maximize"] or None, "--trials": fields["trials"],
                         "--step-budget": fields["step_budget"],
                         "--example-budget": fields["example_budget"]}
                kwargs["chosen"] = tuple(k for k, v in given.items() if v is not None)
                kwargs["statuses"] = fields["statuses"]
                if workload is None or metric is None or target is None:
                    return f(selection=None, **kwargs)
            return f(selection=Selection(workload, metric, target, **fields), **kwargs)

        command.__name__, command.__doc__ = f.__name__, f.__doc__
        # options declared below this decorator were attached to f already
        command.__click_params__ = list(getattr(f, "__click_params__", []))  # type: ignore[attr-defined]
        decorators: list[Callable[[Any], Any]] = [
            click.argument("workload", required=not optional,
                           help="The workload: base_dir/model/optimizer."),
            click.option("--metric", required=not optional,
                         help="Metric column, e.g. val/classification_error."),
        ]
        if goal != "none":
            decorators.append(click.option("--goal", type=float, required=goal == "required",
                                           help=goal_help))
        decorators += [
            click.option("--maximize", is_flag=True,
                         help="Higher is better (e.g. val/average_precision)."),
            click.option("--trials", type=click.IntRange(min=1),
                         help="Use the first N trials by trial id of each study."),
            click.option("--step-budget", "step_budget", type=float, metavar="S",
                         help="Step budget: rows with step <= S (former name --max-steps)."),
            click.option("--max-steps", "max_steps", type=float, hidden=True),
            click.option("--example-budget", "example_budget", type=float, metavar="E",
                         help="Example budget: rows with batch_size * step <= E (former "
                              "name --max-examples)."),
            click.option("--max-examples", "max_examples", type=float, hidden=True),
            click.option("--status", "statuses", multiple=True, default=statuses,
                         show_default=True,
                         type=click.Choice(["COMPLETE", "INCOMPLETE", "INFEASIBLE"]),
                         help="Trial statuses to use (repeatable; replaces the default)."),
            home_option,
        ]
        wrapped: Any = command
        for decorator in reversed(decorators):
            wrapped = decorator(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return build


plot_format_option = click.option(
    "--format", "fmt", type=click.Choice(["png", "svg", "pdf", "html", "json"]), default="png",
    show_default=True, help="Output format (json: the Vega-Lite spec).")

scale_option = click.option(
    "--scale", type=click.FloatRange(min=0.25, max=8), default=2.0, show_default=True,
    help="PNG pixels per point: 2 keeps the layout and doubles the resolution "
         "(SVG and PDF are unchanged).")


@contextmanager
def _figure_notes() -> Iterator[None]:
    """Print the gaps figures were drawn with (each also said on the figure) as one summary
    on stderr, after the figures are written."""
    import warnings

    from curvekit.plotting.render import FigureNotesWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FigureNotesWarning)
        try:
            yield
        finally:
            found = [r.message for r in caught if isinstance(r.message, FigureNotesWarning)]
            for record in caught:
                if not isinstance(record.message, FigureNotesWarning):
                    warnings.warn_explicit(record.message, record.category, record.filename,
                                           record.lineno)
            if found:
                count = sum(len(w.notes) for w in found)
                click.echo(f"Note: {len(found)} figure(s) drawn with {count} gap(s), each "
                           "also written on its panel:", err=True)
                for w in found:
                    click.echo(f"  Figure {w.figure}:", err=True)
                    for note in w.notes:
                        click.echo(f"    - {note}", err=True)


EXIT_EMPTY = 3
"""Exit status of steps-to-result and best when no batch size has a row (stdout still holds
the empty table, stderr says why); a partly empty result exits 0 with warnings."""


@contextmanager
def _explained() -> Iterator[None]:
    """Print curvekit's warnings (why a result is empty or partial, a metric maximized the
    wrong way) as ``Warning: ...`` lines on stderr, once each; stdout stays the data."""
    import warnings

    from curvekit.errors import CurvekitWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CurvekitWarning)
        try:
            yield
        finally:
            seen: set[str] = set()
            for record in caught:
                if not issubclass(record.category, CurvekitWarning):
                    warnings.warn_explicit(record.message, record.category, record.filename,
                                           record.lineno)
                elif str(record.message) not in seen:
                    seen.add(str(record.message))
                    click.echo(f"Warning: {record.message}", err=True)


@main.command("steps-to-result")
@_selection()
@format_option
def steps_to_result(selection: Selection, home: Path | None, fmt: str) -> None:
    """Steps to reach a goal at each batch size (the paper's definition).

    A row qualifies when its metric is strictly below GOAL (above with --maximize); the
    first by (step, trial_id) wins. Batch sizes where no row qualifies are left out, and
    stderr says why (`Warning: ...` lines: the best value reached there, trials left out by
    --status, --trials or the budgets). Exit status 0, or 3 when no batch size reaches the
    goal (stdout then holds the empty table: a CSV header, or [] in JSON).
    """
    from curvekit.measure import steps_to_result as steps_to_result_

    with _explained():
        frame = steps_to_result_(_open(home), selection)
    emit(frame, fmt)
    if frame.is_empty():
        sys.exit(EXIT_EMPTY)


@main.command()
@_selection(goal="none")
@format_option
def best(selection: Selection, home: Path | None, fmt: str) -> None:
    """The best value of a metric at each batch size, and the row it came from.

    Batch sizes without a loaded row are left out, and stderr says why (`Warning: ...`
    lines). Exit status 0, or 3 when no batch size has one (stdout then holds the empty
    table).
    """
    from curvekit.measure import best as best_

    with _explained():
        frame = best_(_open(home), selection)
    emit(frame, fmt)
    if frame.is_empty():
        sys.exit(EXIT_EMPTY)


TABLE_ROWS = 1000
"""Rows ``query --format table`` prints; csv and json print every row."""


@main.command()
@click.argument("sql", help="The query, in DuckDB's SQL.")
@home_option
@format_option
def query(sql: str, home: Path | None, fmt: str) -> None:
    """Run SQL over the views studies, trials, parameters and measurements.

    Metrics and metaparameters are rows: `where metric = 'val/classification_error'`,
    its values in `value`; `where name = 'learning_rate'`, its value in `number`.

    csv and json stream every row of the result as it is computed (any size, little
    memory); the table shows the first 1,000 rows and says how many more there are.
    """
    from curvekit.store.export import export, preview

    store = _open(home)
    if fmt != "table":
        with stdout_guard():  # a full disk behind `>`: Error; a reader gone (`| head`): 141
            out = sys.stdout.buffer
            export(store, sql, out, fmt)
            out.flush()
        return
    frame, total = preview(store, sql, TABLE_ROWS)
    emit(frame, fmt)
    if total > frame.height:
        click.echo(f"{total - frame.height:,} more rows ({total:,} in all); use --format csv "
                   "or --format json for every row.", err=True)


@main.command()
@_selection(goal="optional", optional=True)
@click.option("--all", "all_", is_flag=True,
              help="Every workload, each at the goal the paper's figures use for it "
                   "(--status still selects the trials).")
@click.option("--fit-model", "--model", "model", cls=AliasedOption, hidden_aliases=("--model",),
              type=click.Choice(["piecewise", "critical", "both"]), default="both",
              show_default=True, help="Regime fit, critical-batch-size fit, or both "
              "(former name --model).")
@click.option("--bootstrap", "samples", type=click.IntRange(min=0), default=0,
              show_default=True, help="Resamples for 95% intervals (S_min and B_crit: the "
              "calibrated best-of-N bootstrap; the regimes: over trials).")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True,
              help="Bootstrap seed.")
@click.option("--table", "table", type=click.Path(dir_okay=False, path_type=Path),
              help="Fit a steps-to-result table instead (CSV or JSON: batch_size, steps, "
                   "optional steps_sd) from a paper or another tool.")
@click.option("--excess", type=click.FloatRange(min=0, min_open=True), default=0.2,
              show_default=True, help="Also report the batch size at which steps exceed "
              "perfect scaling by this fraction (0.2: Zhang et al.'s 20%).")
@click.option("--excess-reference", "excess_reference", type=click.FloatRange(
              min=0, min_open=True), metavar="B0", help="The batch size perfect scaling is "
              "drawn through for --excess (default: the law's small-batch asymptote).")
@format_option
def fit(selection: Selection | None, chosen: tuple[str, ...], all_: bool,
        statuses: tuple[str, ...], model: str, samples: int, seed: int, table: Path | None,
        excess: float, excess_reference: float | None, home: Path | None, fmt: str) -> None:
    """Fit the scaling regimes and the critical batch size of steps to result.

    Reports the end of perfect scaling, the maximum useful batch size (start of the
    plateau), the middle slope, and B_crit, S_min and E_min of S = S_min (1 + B_crit / B):
    the law a fully tuned search would find (each batch size's best trial corrected for its
    finite-trial bias) wherever 4 batch sizes have 3 trials at the goal, else the plain fit
    to the best trials and on stderr why; the plain fit comes beside it (B_crit (plain
    fit), b_crit_plain). Beside B_crit, the batch size at which steps exceed perfect
    scaling by --excess, and
    for a workload run with --noise-micro-batches the gradient noise scale B_simple that
    predicts it (median over trials [quartiles]); with --bootstrap, 95% intervals: S_min
    and B_crit from the calibrated best-of-N bootstrap, or on stderr the reason there is
    none, the regimes over trial resamples. --status selects the trials as for
    steps-to-result. Batch sizes that do not reach the goal are left out of
    the fit and stderr says why (`Warning: ...` lines); with fewer than 3 left, WORKLOAD
    is an error (exit 1) and --all gives it a row whose note says why. --table FILE fits
    a steps-to-result table instead of a workload.
    """
    import polars as pl

    from curvekit.scaling import fit as fit_
    from curvekit.scaling import outside_note

    if table is not None:
        if all_ or chosen:
            given = ["--all"] * all_ + list(chosen)
            raise click.UsageError(f"--table fits the table alone; drop {', '.join(given)}")
        from curvekit.ingest.steps_table import fit_table

        rows = [fit_table(table, bootstrap=samples, seed=seed, excess=excess,
                          excess_reference=excess_reference).summary()]
        store = None
    else:
        if all_ and chosen:
            raise click.UsageError(f"--all fits every workload at the paper's goals; drop "
                                   f"{', '.join(chosen)} (--status still selects the trials)")
        if not all_ and selection is None:
            raise click.UsageError("give WORKLOAD, --metric and --goal (or --all, or --table)")
        store = _open(home)
        with _explained():
            rows = fit_(store, selection, all=all_, statuses=statuses, model=model,
                        bootstrap=samples, seed=seed, excess=excess,
                        excess_reference=excess_reference)
    emit(_compact_fits(rows) if fmt == "table" else pl.DataFrame(rows, infer_schema_length=None),
         fmt)
    for row in rows:
        notes = {row.get(f"{q}_interval_note") for q in ("b_crit", "s_min")} - {None}
        for note in sorted(notes, key=str):
            names = " and ".join(label for q, label in (("b_crit", "B_crit"),
                                                       ("s_min", "S_min"))
                                 if row.get(f"{q}_interval_note") == note)
            click.echo(f"Note: {row['workload']}: no interval for {names}: {note}.", err=True)
        if fmt == "table" and row.get("range_note"):
            click.echo(f"Note: {row['workload']}: {row['range_note']}.", err=True)
        if fmt == "table" and row.get("critical_estimate_note"):
            click.echo(f"Note: {row['workload']}: {row['critical_estimate_note']}.", err=True)
        if fmt == "table" and outside_note(row):
            click.echo(f"Note: {row['workload']}: {outside_note(row)}.", err=True)
    if fmt == "table" and store is not None:
        _adaptive_rounds(store, [str(row["workload"]) for row in rows])


def _adaptive_rounds(store: Store, workloads: list[str]) -> None:
    """Below a table of fits: the rounds of each workload an adaptive run made."""
    from curvekit.runner.adaptive import adaptive_record

    known = set(store.workloads())
    for workload in (w for w in workloads if w in known):
        record = adaptive_record(store, workload)
        if record is None:
            continue
        sign = ">" if record.get("maximize") else "<"
        stopped = record.get("stopped") or "not finished"
        _echo(f"\n{workload}: an adaptive run at {record['metric']} {sign} {record['goal']!r}, "
              f"{len(record['rounds'])} rounds (stopped: {stopped}"
              + (f"; {record['reason']}" if record.get("reason") else "") + "):")
        _rounds(record["rounds"])


def _compact_fits(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Fit rows for reading: 'value [low–high]' cells, fewer columns."""
    import polars as pl

    from curvekit.scaling import CORRECTED, beyond_measured
    from curvekit.scaling import bounded_value as _bounded

    def cell(row: dict[str, Any], name: str, digits: int = 0) -> str:
        if row.get(name) is None:
            return "-"
        text = _bounded(row, name, digits)
        if row.get(f"{name}_low") is not None:
            low, high = _bounded(row, f"{name}_low", digits), _bounded(row, f"{name}_high", digits)
            text += f" [{low}]" if low == high and low[0] in "<>" else f" [{low}–{high}]"
        return text

    def predicted(row: dict[str, Any]) -> dict[str, str]:
        # Only workloads that recorded the gradient noise scale have this column.
        if not any(r.get("b_simple") is not None for r in rows):
            return {}
        if row.get("b_simple") is None:
            return {"B_simple (predicted B_crit)": "-"}
        return {"B_simple (predicted B_crit)":
                f"{row['b_simple']:,.0f} [{row['b_simple_low']:,.0f}–"
                f"{row['b_simple_high']:,.0f}]"}

    def excess(row: dict[str, Any]) -> dict[str, str]:
        if row.get("b_excess") is None:
            return {} if not any(r.get("b_excess") is not None for r in rows) else {
                "B at excess": "-"}
        return {"B at excess": cell(row, "b_excess") + f" (+{row['excess']:.0%})"}

    def plain(row: dict[str, Any]) -> dict[str, str]:
        # Beside a bias-corrected B_crit, the paper's plain fit to the best trials.
        if not any(r.get("critical_estimate") == CORRECTED for r in rows):
            return {}
        if row.get("critical_estimate") != CORRECTED:
            return {"B_crit (plain fit)": "= B_crit" if row.get("b_crit") is not None
                    else "-"}
        value = {"b_crit_plain": row["b_crit_plain"], "min_batch_size": row["min_batch_size"],
                 "max_batch_size": row["max_batch_size"],
                 "b_crit_plain_beyond": beyond_measured(row["b_crit_plain"],
                                                        [row["min_batch_size"],
                                                         row["max_batch_size"]])}
        return {"B_crit (plain fit)": _bounded(value, "b_crit_plain")}

    return pl.DataFrame([{
        "workload": r["workload"],
        "goal": f"{r['metric']} {r['goal']}" if "goal" in r else "-",
        "model": r.get("model", "-"),
        "perfect scaling ends": cell(r, "perfect_scaling_end"),
        "max useful batch size": cell(r, "max_useful_batch_size"),
        "slope": cell(r, "diminishing_slope", 2),
        "B_crit": cell(r, "b_crit"),
        **plain(r),
        **excess(r),
        **predicted(r),
        "note": r.get("note") or "",
    } for r in rows])


@main.group()
def plot() -> None:
    """Plots of any workload in the store (the paper's chart builders)."""


@plot.command("steps-to-result")
@_selection(goal="optional", optional=True)
@plot_format_option
@click.option("--fit", "with_fit", is_flag=True,
              help="Overlay the regime fit: fitted line and shaded regimes.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Output file (default steps-to-result.<format>).")
@click.option("--compare", "compare", multiple=True, metavar="WORKLOAD",
              help="Overlay another workload's steps to result, e.g. a scaling protocol's "
                   "runs NAME/MODEL/sgd+linear-scaling (repeatable).")
@click.option("--table", "table", type=click.Path(dir_okay=False, path_type=Path),
              help="Plot a steps-to-result table instead (CSV or JSON, as fit --table).")
@scale_option
def plot_steps_to_result(selection: Selection | None, chosen: tuple[str, ...],
                         statuses: tuple[str, ...], home: Path | None, fmt: str,
                         with_fit: bool, out: Path | None, compare: tuple[str, ...],
                         table: Path | None, scale: float) -> None:
    """Steps to result against batch size, log2 × log2, with the perfect-scaling line.

    Batch sizes that do not reach the goal are left out and stderr says why. When none
    reaches it nothing is written: a blank chart would say nothing, so the command fails
    (exit 1) with the explanation. --compare draws more workloads on the same axes (the
    tuned frontier beside a heuristic protocol), each selected as WORKLOAD is; the
    perfect-scaling line and --fit stay WORKLOAD's. --table FILE draws a steps-to-result
    table (a paper's, another tool's) the same way, instead of a workload.
    """
    from curvekit.plotting.plots import plot_steps_to_result as plot_

    if table is not None:
        if chosen or compare:
            given = [*chosen, *(["--compare"] if compare else [])]
            raise click.UsageError(f"--table plots the table alone; drop {', '.join(given)}")
        from curvekit.ingest.steps_table import fit_table
        from curvekit.plotting.plots import plot_steps_table

        chart, meta = plot_steps_table(fit_table(table), fit=with_fit)
        meta["table"] = str(table)
    else:
        if selection is None:
            raise click.UsageError("give WORKLOAD, --metric and --goal (or --table FILE)")
        with _explained():
            chart, meta = plot_(_open(home), selection, fit=with_fit, compare=compare)
    _save_plot(chart, meta, out, "steps-to-result", fmt, scale)


def _save_plot(chart: Any, meta: dict[str, Any], out: Path | None, default: str,
               fmt: str, scale: float) -> None:
    from curvekit.plotting.output import save

    target = save(chart, out or Path(f"{default}.{fmt}"), meta, fmt=fmt, scale=scale)
    _echo(f"Wrote {target}")


def _out_option(default: str) -> Callable[[F], F]:
    out = click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
                       help=f"Output file (default {default}.<format>).")
    return lambda f: out(scale_option(f))


@plot.command("metaparameters")
@_selection()
@plot_format_option
@click.option("--parameter", default="effective_learning_rate", show_default=True,
              help="effective_learning_rate, learning_rate, momentum, or any metaparameter.")
@_out_option("metaparameters")
def plot_metaparameters(selection: Selection, home: Path | None, fmt: str, parameter: str,
                        out: Path | None, scale: float) -> None:
    """The winning trial's metaparameter per batch size, with the scaling heuristics."""
    from curvekit.plotting.plots import plot_metaparameters as plot_

    with _explained():
        chart, meta = plot_(_open(home), selection, parameter=parameter)
    _save_plot(chart, meta, out, "metaparameters", fmt, scale)


@plot.command("scatter")
@_selection(statuses=("COMPLETE", "INFEASIBLE"))
@plot_format_option
@click.option("--batch-size", type=int, required=True, help="The study to show.")
@_out_option("scatter")
def plot_scatter(selection: Selection, home: Path | None, fmt: str, batch_size: int,
                 out: Path | None, scale: float) -> None:
    """Learning rate vs 1 - momentum of one study: goal achieved, not achieved, infeasible.

    --status takes COMPLETE and INFEASIBLE (both by default, as in the paper's scatters).
    """
    from curvekit.plotting.plots import plot_scatter as plot_

    chart, meta = plot_(_open(home), selection, batch_size)
    _save_plot(chart, meta, out, "scatter", fmt, scale)


@plot.command("best")
@_selection(goal="optional", goal_help="Draw this value as a dotted line.")
@plot_format_option
@_out_option("best")
def plot_best(selection: Selection, home: Path | None, fmt: str, out: Path | None,
              scale: float) -> None:
    """The best value of the metric per batch size, within the budgets."""
    from curvekit.plotting.plots import plot_best as plot_

    with _explained():
        chart, meta = plot_(_open(home), selection)
    _save_plot(chart, meta, out, "best", fmt, scale)


@main.command("figure")
@click.argument("number", help="The figure's number in the paper, 1 to 24; 9a or 9b for one "
                "part of Figure 9.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Output file (default figure-NN.<format>, figure-09a.<format>).")
@plot_format_option
@scale_option
@home_option
def figure_(number: str, out: Path | None, fmt: str, scale: float, home: Path | None) -> None:
    """Render the paper's figure NUMBER (1–24, or 9a / 9b: one part of Figure 9) from the
    store."""
    from contextlib import nullcontext

    from curvekit.plotting.static import STATIC_FORMATS, Renderer

    # The renderer's engine starts in its own process while the figure is queried.
    with Renderer() if fmt in STATIC_FORMATS else nullcontext() as renderer:
        from curvekit.plotting.output import save
        from curvekit.plotting.render import check_figure_number, figure_spec, file_name

        spec = check_figure_number(number)  # a wrong number is the first thing to hear about
        with _figure_notes():
            chart, meta = figure_spec(spec.name, _open(home))
        target = save(chart, out or Path(file_name(spec, fmt)), meta, fmt=fmt,
                      scale=scale, renderer=renderer)
    _echo(f"Wrote {target}")


@main.command()
@click.option("--out", "folder", type=click.Path(file_okay=False, path_type=Path),
              default=Path("figures"), show_default=True, help="Output folder.")
@plot_format_option
@scale_option
@home_option
def figures(folder: Path, fmt: str, scale: float, home: Path | None) -> None:
    """Render every available figure of the paper into a folder, with an index.html gallery.

    Figures drawn with gaps (a curve normalized at another batch size, a curve without
    points) say so on the panel; stderr lists them once, after the run."""
    from curvekit.plotting.render import render_all

    with _figure_notes():
        written = render_all(_open(home), folder, fmt=fmt, scale=scale)
    _echo(f"Wrote {len(written)} figures and {folder / 'index.html'}")


@main.command("report")
@click.option("--out", "folder", type=click.Path(file_okay=False, path_type=Path),
              default=Path("report"), show_default=True, help="Output folder.")
@click.option("--bootstrap", "samples", type=click.IntRange(min=0), default=200,
              show_default=True, help="Bootstrap resamples per fit (0: no intervals).")
@click.option("--no-figures", is_flag=True, help="Leave out the gallery of the paper's figures.")
@click.option("--workload", "workloads", multiple=True,
              help="Only these workloads (repeatable; default: all).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@home_option
def report_(folder: Path, samples: int, no_figures: bool, workloads: tuple[str, ...],
            quiet: bool, home: Path | None) -> None:
    """Write a self-contained static site: every workload, its fits and charts, the figures."""
    from curvekit.reporting.site import report

    store = _open(home)
    with _progress(quiet) as progress:
        site = report(store, folder, bootstrap=samples, figures=not no_figures,
                      workloads=list(workloads) or None, progress=progress)
    _echo(f"Wrote {site / 'index.html'} (open it in a browser; no server needed)")


def _int_list(text: str, what: str) -> list[int | str]:
    items: list[int | str] = []
    for part in text.split(","):
        part = part.strip()
        if part.lower() == "full":
            items.append("full")
        elif part.isdigit():
            items.append(int(part))
        elif part:
            raise click.BadParameter(f"{part!r} is not an integer", param_hint=what)
    return items


def _steps(text: str) -> int | dict[int, int]:
    """``1000``, or per batch size ``8:4000,16:2000,...``."""
    try:
        if ":" not in text:
            return int(text)
        return {int(b): int(s) for b, s in (p.split(":") for p in text.split(",") if p.strip())}
    except ValueError:
        raise click.BadParameter(f"{text!r}: give one number, or BATCH:STEPS pairs such as "
                                 "8:4000,16:2000", param_hint="--steps") from None


def _base_parameters(items: tuple[str, ...]) -> dict[str, float]:
    """``--base-parameter NAME=VALUE`` options as a mapping of numbers."""
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not key.strip() or not math.isfinite(number):
            raise click.BadParameter(f"{item!r}: give NAME=VALUE with a finite number, such "
                                     "as momentum=0.9", param_hint="--base-parameter")
        out[key.strip()] = number
    return out


@main.command("run")
@click.argument("name", required=False,
                help="The base_dir of the new workloads (default: the data set's name).")
@click.option("--dataset", default="digits", show_default=True,
              help="digits, mnist, fashion_mnist, cifar_10, or package.module:function.")
@click.option("--model", default="fc_128_128", show_default=True,
              help="fc_<widths> (e.g. fc-128-128), simple_cnn_base|narrow|wide, or "
                   "package.module:function.")
@click.option("--optimizer", "optimizers", default="nesterov_momentum", show_default=True,
              help="Comma-separated: sgd, momentum, nesterov_momentum, adam.")
@click.option("--batch-sizes", default="16,64,256", show_default=True,
              help="Comma-separated batch sizes; 'full' is the whole training set.")
@click.option("--trials-per-study", "--trials", "trials", cls=AliasedOption,
              hidden_aliases=("--trials",), type=click.IntRange(min=1, max=MAX_TRIALS),
              help="Trials (quasi-random search points) per study, that is per optimizer and "
                   "batch size [default: 8; 1 seed with a scaling protocol].")
@click.option("--steps", default="1000", show_default=True,
              help="Step budget of every trial, or per batch size as 8:4000,16:2000,...")
@click.option("--eval-every", type=click.IntRange(min=1, max=MAX_STEPS), default=50,
              show_default=True,
              help="Evaluate every N steps (and at step 0 and the last step).")
@click.option("--space", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Search space JSON in the release's parameter_configs format (or one "
                   "per optimizer). Default: see docs/running.md.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True,
              help="Seed of the search and of the training: the same seed trains the same "
                   "trials.")
@click.option("--sampler", type=click.Choice(["sobol", "halton"]), default="sobol",
              show_default=True, help="Quasi-random sequence of the search.")
@click.option("--device", default="auto", show_default=True,
              help="auto (a GPU if torch sees one, else the CPU), cpu, cuda or cuda:N.")
@click.option("--workers", type=click.IntRange(min=1, max=MAX_WORKERS),
              help="Trials in parallel (default 1, or one per GPU).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
              show_default=True, help="Local processes, or a Ray cluster.")
@click.option("--ray-address", help="Ray cluster address (default: RAY_ADDRESS or local).")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Folder of the sweep's finished trials (default HOME/runs/NAME/MODEL).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where torchvision data sets (MNIST, ...) are.")
@click.option("--no-store", is_flag=True, help="Keep the results in the work folder only.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--protocol", type=click.Choice(["tuned", "linear-scaling", "sqrt-scaling"]),
              default="tuned", show_default=True,
              help="tuned: search at every batch size; linear-/sqrt-scaling: scale a base "
                   "learning rate with the batch size, no search (--trials-per-study seeds "
                   "each).")
@click.option("--base-batch-size", type=click.IntRange(min=1, max=MAX_BATCH_SIZE),
              help="Scaling protocols: the batch size the base setting belongs to.")
@click.option("--base-learning-rate", type=click.FloatRange(min=0, min_open=True),
              help="Scaling protocols: the learning rate at the base batch size (default: "
                   "the best trial of the tuned workload there, from the store).")
@click.option("--base-parameter", "base_parameters", multiple=True, metavar="NAME=VALUE",
              help="Scaling protocols: another base metaparameter, e.g. momentum=0.9 "
                   "(repeatable).")
@click.option("--warmup", default="0", show_default=True,
              help="Scaling protocols: warmup in steps (200) or epochs (5e).")
@click.option("--ghost-batch-size", type=click.IntRange(min=2, max=MAX_BATCH_SIZE),
              help="Scaling protocols: batch-norm statistics per chunk of this many examples "
                   "(models with batch norm, e.g. fc_128_128_bn).")
@click.option("--noise-micro-batches", type=click.IntRange(min=0, max=MAX_BATCH_SIZE),
              default=0,
              show_default=True,
              help="Record the gradient noise scale at every evaluation from this many "
                   "micro-batches of a batch (2 or more; 0: off).")
@click.option("--trials-at-once", type=click.IntRange(min=1, max=MAX_TRIALS),
              help="Train up to N trials of a study together as one batched model "
                   "[default: the whole study, as memory allows]; 1: one by one.")
@click.option("--import-path", "import_paths", multiple=True, metavar="DIR",
              type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Look a package.module:function --dataset or --model up in DIR first "
                   "(repeatable); the working folder is not searched otherwise.")
@click.option("--adaptive", is_flag=True,
              help="Train in rounds, placing each round's trials where they shrink B_crit's "
                   "interval most per trial (one optimizer; needs --metric, --goal and "
                   "--trial-budget; --trials-per-study is then the first round's trials at "
                   "every other batch size, default 2).")
@click.option("--metric", help="With --adaptive: the metric of steps to result.")
@click.option("--goal", type=float, help="With --adaptive: the value the metric must pass.")
@click.option("--maximize", is_flag=True,
              help="With --adaptive: the metric must rise above the goal.")
@click.option("--trial-budget", type=click.IntRange(min=1, max=MAX_TRIALS),
              help="With --adaptive: trials of the whole run, all rounds together.")
@click.option("--target-width", type=click.FloatRange(min=0, min_open=True),
              help="With --adaptive: stop once B_crit's 95%% interval is at most this wide "
                   "relative to B_crit [default: spend the budget].")
@click.option("--round-trials", type=click.IntRange(min=1, max=MAX_TRIALS),
              help="With --adaptive: trials per round after the first [default: one per "
                   "batch size].")
@click.option("--bootstrap", "samples", type=click.IntRange(min=1, max=100_000), default=1000,
              show_default=True,
              help="With --adaptive: simulations of each round's interval.")
@home_option
@wait_option
def run(name: str | None, dataset: str, model: str, optimizers: str, batch_sizes: str,
        trials: int | None, steps: str, eval_every: int, space: Path | None, seed: int,
        sampler: str, device: str, workers: int | None, executor: str,
        ray_address: str | None, work_dir: Path | None, data_dir: Path | None,
        no_store: bool, quiet: bool, protocol: str, base_batch_size: int | None,
        base_learning_rate: float | None, base_parameters: tuple[str, ...], warmup: str,
        ghost_batch_size: int | None, noise_micro_batches: int,
        trials_at_once: int | None, import_paths: tuple[Path, ...], adaptive: bool,
        metric: str | None, goal: float | None, maximize: bool, trial_budget: int | None,
        target_width: float | None, round_trials: int | None, samples: int,
        home: Path | None, wait: float) -> None:
    """Train a sweep with the paper's protocol and add it to the store.

    One study per optimizer and batch size, each with --trials-per-study quasi-random
    trials of a fixed step budget; the results become workloads NAME/MODEL/OPTIMIZER (NAME
    defaults to the data set's name). Run the same command again to resume an interrupted sweep.

    With --protocol linear-scaling or sqrt-scaling, each batch size trains the learning
    rate scaled from --base-batch-size (warmup, then the paper's linear decay),
    --trials-per-study seeds each (default 1), into the workload NAME/MODEL/OPTIMIZER+PROTOCOL.

    With --adaptive --metric M --goal G --trial-budget N, the run trains in rounds: after
    each, it fits B_crit to steps to result and sends the next trials where a forecast of
    B_crit's calibrated interval narrows most per trial (while the fit gives no interval,
    where they make one possible in the fewest trials), until the interval's relative
    width is at most --target-width or N trials are spent (stderr says which, with the
    rounds). The first round trains at every other batch size, the ends included.
    """
    from curvekit.runner.adaptive import Adaptive
    from curvekit.runner.sweep import run as run_

    given = [flag for flag, value in (
        ("--metric", metric), ("--goal", goal), ("--maximize", maximize or None),
        ("--trial-budget", trial_budget), ("--target-width", target_width),
        ("--round-trials", round_trials)) if value is not None]
    settings = None
    if not adaptive and given:
        raise click.UsageError(f"{', '.join(given)} only "
                               f"{'applies' if len(given) == 1 else 'apply'} to an adaptive "
                               "run; add --adaptive, or drop "
                               f"{'it' if len(given) == 1 else 'them'}")
    if adaptive:
        missing = [flag for flag, value in (("--metric", metric), ("--goal", goal),
                                            ("--trial-budget", trial_budget)) if value is None]
        if missing:
            raise click.UsageError(f"--adaptive needs {', '.join(missing)} (e.g. --metric "
                                   "val/classification_error --goal 0.05 --trial-budget 100)")
        assert metric is not None and goal is not None and trial_budget is not None
        settings = Adaptive(metric, goal, trial_budget, target_width, round_trials, samples,
                            maximize)

    space_data = None if space is None else structured.load(
        space, kind="json", expect=dict, error=lambda message, _: RunError(
            f"--space {message} (a search space is a JSON object of parameter_configs)"))
    options: dict[str, Any] = dict(
        dataset=dataset, model=model, optimizers=[o.strip() for o in optimizers.split(",")],
        batch_sizes=_int_list(batch_sizes, "--batch-sizes"), trials=trials,
        steps=_steps(steps), eval_every=eval_every, space=space_data, seed=seed,
        sampler=sampler, device=device, workers=workers, executor=executor,
        ray_address=ray_address, home=home, work_dir=work_dir, data_dir=data_dir,
        store=not no_store, protocol=protocol, base_batch_size=base_batch_size,
        base_learning_rate=base_learning_rate,
        base_parameters=_base_parameters(base_parameters), warmup=warmup,
        ghost_batch_size=ghost_batch_size, noise_micro_batches=noise_micro_batches,
        trials_at_once=trials_at_once, import_paths=import_paths, adaptive=settings)
    with _progress(quiet) as progress, _explained(), _waiting(wait):
        result = run_(name, **options, progress=progress)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result.statuses.items()))
    _echo(f"{result.trials} trials ({result.ran} run now, {result.resumed} from "
               f"{result.work_dir}) in {result.seconds:.0f} s: {counts}.")
    if result.added:
        _echo("In the store: " + ", ".join(result.workloads))
    if result.adaptive is not None:
        _rounds(result.adaptive.rounds, err=True)
        click.echo(f"Stopped ({result.adaptive.stopped}): {result.adaptive.reason}.", err=True)


def _rounds(rounds: Any, *, err: bool = False) -> None:
    """An adaptive run's rounds as a table (``Round`` objects or a record's dicts)."""
    import polars as pl

    from curvekit.runner.adaptive import round_rows

    record = {"rounds": [r if isinstance(r, dict) else r.to_json() for r in rounds]}
    frame = pl.DataFrame(round_rows(record))
    if err:
        click.echo("\n".join(["Rounds of the adaptive run:", *_table_lines(frame)]), err=True)
    else:
        emit(frame, "table")


@main.command()
@home_option
@wait_option
def demo(home: Path | None, wait: float) -> None:
    """Install the demo data set (digits, made with curvekit run) into the store, offline."""
    from curvekit.runner.demo import demo as demo_

    with _waiting(wait):
        result = demo_(home)
    _echo(f"{'Added' if result.changed else 'Already in the store:'} "
               f"{', '.join(result.workloads)} ({result.trials} trials, "
               f"{result.measurements:,} measurements). Try: curvekit steps-to-result "
               f"{result.workloads[-1]} --metric {result.metric} --goal {result.goal}")
