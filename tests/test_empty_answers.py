"""No silent empty answers: an empty or partly empty result says why (stderr for the CLI,
warnings for Python) while stdout stays data; --maximize on a lower-is-better metric warns;
fit takes --status; Lightning runs of their full max_steps are COMPLETE."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import curvekit
from curvekit.cli import EXIT_EMPTY, main
from curvekit.errors import CurvekitWarning, QueryError
from curvekit.ingest.add import add, build
from curvekit.measure import (
    DirectionWarning,
    EmptyResultWarning,
    explain_empty,
    metric_direction,
)
from curvekit.plotting.plots import plot_steps_to_result
from curvekit.scaling import FitError, fit_workload
from curvekit.store.store import Store
from tests.conftest import snapshot
from tests.patience import PATIENCE

NAME = "my/net/sgd"
METRIC = "val/classification_error"
STEPS = range(0, 1001, 100)
# (file, batch size, status, final error, step where it is reached). The error falls
# linearly from 0.9 to the final value, then stays. At goal 0.2 the COMPLETE trials reach it
# at batch sizes 16, 32 and 256; at 64 only an INCOMPLETE trial does (the COMPLETE one
# stops at 0.35); at 128 there is no COMPLETE trial, and the INCOMPLETE one stops at 0.3.
RUNS = [
    ("b16.csv", 16, "COMPLETE", 0.08, 800),
    ("b32.csv", 32, "COMPLETE", 0.09, 500),
    ("b64a.csv", 64, "COMPLETE", 0.35, 300),
    ("b64b.csv", 64, "INCOMPLETE", 0.05, 300),
    ("b128.csv", 128, "INCOMPLETE", 0.30, 200),
    ("b256.csv", 256, "COMPLETE", 0.085, 200),
]


def error(step: int, final: float, at: int) -> float:
    return round(max(final, 0.9 - (0.9 - final) * step / at), 9)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("logs")
    manifest = ["[workload]", "train_steps = 1000"]
    for i, (file, bs, status, final, at) in enumerate(RUNS):
        rows = "".join(f"{s},{error(s, final, at)!r},{2 * error(s, final, at)!r}\n"
                       for s in STEPS)
        (logs / file).write_text(f"step,{METRIC},train/cross_entropy_error\n" + rows)
        manifest += ["[[runs]]", f'run = "{file}"', f"batch_size = {bs}", f'status = "{status}"',
                     f"parameters = {{ learning_rate = {0.1 * (i + 1)!r} }}"]
    (logs / "runs.toml").write_text("\n".join(manifest) + "\n")
    target = tmp_path_factory.mktemp("home")
    add(logs, name=NAME, manifest=logs / "runs.toml", home=target)
    return target


def cli(home: Path, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--home", str(home)])


def warning_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]


# -- steps-to-result and best through the CLI -------------------------------------------


def test_partial_steps_to_result_says_why_on_stderr_and_stdout_is_csv(home: Path) -> None:
    result = cli(home, "steps-to-result", NAME, "--metric", METRIC, "--goal", "0.2",
                 "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))  # data only, no warning in it
    assert [int(r["batch_size"]) for r in rows] == [16, 32, 256]
    lines = warning_lines(result)
    assert lines[0] == (
        f"Warning: {NAME}: no loaded trial reaches {METRIC} < 0.2 at batch size 64; the best "
        "value reached is 0.35 at batch size 64 (trial 1, step 300)")
    assert f"Warning: {NAME}: at batch size 128 no trial has an allowed status (COMPLETE); " \
        "there are 1 INCOMPLETE" in lines
    assert lines[2] == (
        f"Warning: {NAME}: 2 INCOMPLETE trials at the batch sizes left out are excluded by "
        "status (allowed: COMPLETE); with them, batch size 64 would reach the goal: use "
        "--status COMPLETE --status INCOMPLETE (statuses=('COMPLETE', 'INCOMPLETE'))")


def test_following_the_hint_fills_the_batch_size(home: Path) -> None:
    result = cli(home, "steps-to-result", NAME, "--metric", METRIC, "--goal", "0.2",
                 "--status", "COMPLETE", "--status", "INCOMPLETE", "--format", "json")
    assert result.exit_code == 0
    assert [r["batch_size"] for r in json.loads(result.stdout)] == [16, 32, 64, 256]
    # only 128 is left: its one trial stops at 0.3, and nothing else could fill it
    assert warning_lines(result) == [
        f"Warning: {NAME}: no loaded trial reaches {METRIC} < 0.2 at batch size 128; the "
        "best value reached is 0.3 at batch size 128 (trial 1, step 200)"]


def test_empty_result_exits_3_with_empty_json_and_the_best_values(home: Path) -> None:
    result = cli(home, "steps-to-result", NAME, "--metric", METRIC, "--goal", "0.01",
                 "--format", "json")
    assert result.exit_code == EXIT_EMPTY == 3
    assert json.loads(result.stdout) == []
    lines = warning_lines(result)
    assert lines[0].startswith(f"Warning: {NAME}: no loaded trial reaches {METRIC} < 0.01 "
                               "at batch sizes 16, 32, 64, 256; the best value reached is "
                               "0.08 at batch size 16 (trial 1, step 800), 0.09 at batch "
                               "size 32")
    assert any("with them, none would reach the goal either" in line for line in lines)


def test_empty_csv_is_a_header_and_all_filtered_by_status_is_named(home: Path) -> None:
    result = cli(home, "steps-to-result", NAME, "--metric", METRIC, "--goal", "0.2",
                 "--status", "INFEASIBLE", "--format", "csv")
    assert result.exit_code == EXIT_EMPTY
    assert result.stdout.splitlines() == [
        f"batch_size,step,trial_id,{METRIC},learning_rate,effective_learning_rate"]
    lines = warning_lines(result)
    assert lines[0] == (f"Warning: {NAME}: at batch sizes 16, 32, 64, 128, 256 no trial has "
                        "an allowed status (INFEASIBLE); there are 4 COMPLETE, 2 INCOMPLETE")
    assert f"Warning: {NAME}: 4 COMPLETE trials at the batch sizes left out are excluded by " \
        "status (allowed: INFEASIBLE); with them, batch sizes 16, 32, 256 would reach the " \
        "goal: use --status INFEASIBLE --status COMPLETE " \
        "(statuses=('INFEASIBLE', 'COMPLETE'))" in lines


def test_best_says_which_batch_sizes_have_no_rows_and_exits_3_when_none(home: Path) -> None:
    partial = cli(home, "best", NAME, "--metric", METRIC, "--format", "csv")
    assert partial.exit_code == 0
    assert [r["batch_size"] for r in csv.DictReader(io.StringIO(partial.stdout))] == \
        ["16", "32", "64", "256"]
    assert warning_lines(partial)[0] == (
        f"Warning: {NAME}: at batch size 128 no trial has an allowed status (COMPLETE); "
        "there are 1 INCOMPLETE")
    assert "with it, batch size 128 would have values" in warning_lines(partial)[1]
    empty = cli(home, "best", NAME, "--metric", METRIC, "--status", "INFEASIBLE",
                "--format", "json")
    assert empty.exit_code == EXIT_EMPTY and json.loads(empty.stdout) == []
    assert warning_lines(empty)


def test_budgets_that_cut_every_row_are_named(home: Path) -> None:
    result = cli(home, "steps-to-result", NAME, "--metric", METRIC, "--goal", "0.2",
                 "--max-examples", "1", "--format", "csv")
    assert result.exit_code == EXIT_EMPTY
    lines = warning_lines(result)
    assert any("without the budgets (batch_size * step <= 1), batch sizes 16, 32, 256 "
               "would reach the goal" in line for line in lines)
    # step 0 stays within an example budget; a step budget below 0 leaves nothing at all
    cut = cli(home, "best", NAME, "--metric", METRIC, "--max-steps", "-1", "--format", "csv")
    assert cut.exit_code == EXIT_EMPTY
    assert (f"Warning: {NAME}: the budgets (step <= -1) leave no rows at batch sizes 16, 32, "
            "64, 256; the first measurements are at step 0 at batch size 16, step 0 at batch "
            "size 32, step 0 at batch size 64, step 0 at batch size 256") in warning_lines(cut)


def test_trials_cap_is_named(home: Path) -> None:
    lines = explain_empty(Store.open(home), curvekit.Selection(
        NAME, METRIC, 0.2, trials=1, statuses=("COMPLETE", "INCOMPLETE")))
    assert f"{NAME}: --trials 1 (trials=1) leaves out 1 trial of an allowed status at batch " \
        "size 64; with them, batch size 64 would reach the goal" in lines


def test_complete_result_has_no_warning(home: Path) -> None:
    result = cli(home, "steps-to-result", NAME, "--metric", METRIC, "--goal", "0.5",
                 "--status", "COMPLETE", "--status", "INCOMPLETE", "--format", "csv")
    assert result.exit_code == 0 and result.stderr == ""


# -- the Python API ----------------------------------------------------------------------


def test_python_api_warns_the_same_sentences(home: Path) -> None:
    store = Store.open(home)
    with pytest.warns(EmptyResultWarning) as record:
        curve = curvekit.steps_to_result(store, curvekit.Selection(NAME, METRIC, 0.2))
    assert curve["batch_size"].to_list() == [16, 32, 256]
    said = [str(w.message) for w in record if issubclass(w.category, CurvekitWarning)]
    assert said == explain_empty(store, curvekit.Selection(NAME, METRIC, 0.2))
    assert record[0].filename == __file__  # points at the caller's line, not curvekit's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert curvekit.steps_to_result(store, curvekit.Selection(NAME, METRIC, 0.2),
                                        explain=False).height == 3
        assert explain_empty(store, curvekit.Selection(
            NAME, METRIC, 0.5, statuses=("COMPLETE", "INCOMPLETE"))) == []


def test_warnings_can_become_errors(home: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", CurvekitWarning)
        with pytest.raises(EmptyResultWarning, match="no trial has an allowed status"):
            curvekit.best(Store.open(home), curvekit.Selection(NAME, METRIC))


# -- --maximize on a lower-is-better metric ---------------------------------------------


def test_maximize_on_an_error_warns_and_names_the_direction(home: Path) -> None:
    result = cli(home, "steps-to-result", NAME, "--metric", METRIC, "--goal", "0.5",
                 "--maximize", "--format", "csv")
    assert result.exit_code == 0
    assert {r["step"] for r in csv.DictReader(io.StringIO(result.stdout))} == {"0"}
    assert warning_lines(result)[0] == (
        f"Warning: --maximize (maximize=True) on '{METRIC}', whose name says lower is better "
        "(an error or a loss): a row qualifies when it is above the goal, so the first rows "
        "of training (step 0) win, and 'best' is the worst value; drop --maximize")
    with pytest.warns(DirectionWarning, match="lower is better"):
        curvekit.best(Store.open(home), curvekit.Selection(
            NAME, METRIC, maximize=True, statuses=("COMPLETE", "INCOMPLETE")))


@pytest.mark.parametrize(("metric", "higher"), [
    ("val/cross_entropy_error", False), ("train_loss", False), ("val/perplexity", False),
    ("val/average_precision", True), ("val_accuracy", True), ("learning_rate", None)])
def test_metric_direction_by_name(metric: str, higher: bool | None) -> None:
    assert metric_direction(metric) is higher


# -- fit and fit --all take --status -----------------------------------------------------


def test_fit_refuses_with_the_reason_and_fits_with_status(home: Path) -> None:
    refused = cli(home, "fit", NAME, "--metric", METRIC, "--goal", "0.088")
    assert refused.exit_code == 1
    assert refused.stderr.startswith(
        f"Error: {NAME}: only 2 batch sizes reach {METRIC} < 0.088; a fit needs at least 3; "
        "no loaded trial reaches")
    assert "with them, batch size 64 would reach the goal: use --status COMPLETE --status " \
        "INCOMPLETE" in refused.stderr
    fitted = cli(home, "fit", NAME, "--metric", METRIC, "--goal", "0.088", "--status",
                 "COMPLETE", "--status", "INCOMPLETE", "--format", "json")
    assert fitted.exit_code == 0, fitted.output
    (row,) = json.loads(fitted.stdout)
    assert row["points"] == 3  # 16, 64 (its INCOMPLETE trial) and 256
    assert any("batch sizes 32, 128" in line for line in warning_lines(fitted))
    fit = fit_workload(Store.open(home), curvekit.Selection(
        NAME, METRIC, 0.088, statuses=("COMPLETE", "INCOMPLETE")), explain=False)
    assert fit.batch_sizes.tolist() == [16, 64, 256] and fit.steps.tolist() == [800, 300, 200]
    with pytest.raises(FitError, match="only 2 batch sizes"):
        fit_workload(Store.open(home), curvekit.Selection(NAME, METRIC, 0.088))


def test_fit_all_passes_status_through(home: Path) -> None:
    # The rule goal (COMPLETE bests 0.08, 0.09, 0.35, 0.085: median 0.0875, up to 0.088)
    # is reached by 2 batch sizes of COMPLETE trials, and by 3 with the INCOMPLETE ones.
    alone = cli(home, "fit", "--all", "--format", "json")
    assert alone.exit_code == 0
    (row,) = json.loads(alone.stdout)
    assert row["note"].startswith(f"{NAME}: only 2 batch sizes reach {METRIC} < 0.088")
    wider = cli(home, "fit", "--all", "--status", "COMPLETE", "--status", "INCOMPLETE",
                "--format", "csv")
    assert wider.exit_code == 0
    (row,) = list(csv.DictReader(io.StringIO(wider.stdout)))
    assert row["points"] == "3" and row["goal"] == "0.088"
    assert warning_lines(wider)  # 32 and 128 left out, and why


# -- plot steps-to-result ---------------------------------------------------------------


def test_plot_of_an_empty_curve_writes_nothing_and_says_why(home: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "chart.json"
    before = snapshot(home)
    result = cli(home, "plot", "steps-to-result", NAME, "--metric", METRIC, "--goal", "0.01",
                 "--format", "json", "--out", str(out))
    assert result.exit_code == 1 and not out.exists()
    assert result.stderr.startswith(f"Error: nothing to plot: no batch size of {NAME} "
                                    f"reaches {METRIC} < 0.01, so no chart was written; "
                                    "no loaded trial reaches")
    assert snapshot(home) == before
    with pytest.raises(QueryError, match=r"best value reached is 0\.08 at batch size 16"):
        plot_steps_to_result(Store.open(home), curvekit.Selection(NAME, METRIC, 0.01))


def test_plot_of_a_partial_curve_is_written_with_warnings_and_status(home: Path,
                                                                     tmp_path: Path) -> None:
    out = tmp_path / "chart.json"
    result = cli(home, "plot", "steps-to-result", NAME, "--metric", METRIC, "--goal", "0.2",
                 "--status", "COMPLETE", "--status", "INCOMPLETE", "--format", "json",
                 "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Wrote {out}\n"
    assert warning_lines(result) == [
        f"Warning: {NAME}: no loaded trial reaches {METRIC} < 0.2 at batch size 128; the "
        "best value reached is 0.3 at batch size 128 (trial 1, step 200)"]
    assert json.loads(out.read_text())["usermeta"]["curvekit"]["statuses"] == \
        ["COMPLETE", "INCOMPLETE"]
    fit_refused = cli(home, "plot", "steps-to-result", NAME, "--metric", METRIC, "--goal",
                      "0.088", "--fit", "--format", "json", "--out", str(tmp_path / "f.json"))
    assert fit_refused.exit_code == 1 and "--fit needs at least 3" in fit_refused.stderr


# -- Lightning's step convention ---------------------------------------------------------

# Written by lightning 2.6.6's CSVLogger (Trainer(max_steps=20, log_every_n_steps=5,
# val_check_interval=10, check_val_every_n_epoch=None), a 64-example loader of batch 8,
# self.log("train_loss") in training_step and self.log("val_loss") in validation_step):
# its `step` is the 0-based index of the batch just trained, so the last row of a
# 20-step run is at step 19. The bytes below are that file's, unchanged.
LIGHTNING_METRICS = """epoch,step,train_loss,val_loss
0,4,0.9766409397125244,
1,9,0.9576550126075745,
1,9,,0.7617984414100647
1,14,0.838958203792572,
2,19,0.47945117950439453,
2,19,,0.7908373475074768
"""
LIGHTNING_HPARAMS = "lr: 0.1\nmax_steps: 20\n"


def lightning_run(folder: Path, rows: int | None = None) -> None:
    folder.mkdir(parents=True)
    lines = LIGHTNING_METRICS.splitlines(keepends=True)
    (folder / "metrics.csv").write_text("".join(lines[:rows]))
    (folder / "hparams.yaml").write_text(LIGHTNING_HPARAMS)


def test_lightning_run_of_its_full_max_steps_is_complete(tmp_path: Path) -> None:
    logs = tmp_path / "lightning_logs"
    lightning_run(logs / "version_0")           # trained all 20 steps: last row at step 19
    lightning_run(logs / "version_1", rows=4)   # stopped after step 9: 10 steps of 20
    (tmp_path / "runs.toml").write_text('[[runs]]\nrun = "*"\nbatch_size = 8\n')
    data = build(logs, name="l/net/sgd", manifest=tmp_path / "runs.toml")
    assert data.studies[0].train_steps == 20  # hparams.yaml's max_steps
    assert [(t.status, t.steps) for t in data.trials] == [("COMPLETE", 19), ("INCOMPLETE", 9)]
    # the same logs with the budget in the manifest, and with none at all
    (tmp_path / "runs.toml").write_text("[workload]\ntrain_steps = 20\n[[runs]]\n"
                                        'run = "*"\nbatch_size = 8\n')
    data = build(logs, name="l/net/sgd", manifest=tmp_path / "runs.toml")
    assert [t.status for t in data.trials] == ["COMPLETE", "INCOMPLETE"]
    (logs / "version_0" / "hparams.yaml").write_text("lr: 0.1\n")
    (logs / "version_1" / "hparams.yaml").write_text("lr: 0.1\n")
    data = build(logs, name="l/net/sgd", manifest=tmp_path / "runs.toml")
    assert [t.status for t in data.trials] == ["COMPLETE", "INCOMPLETE"]


def test_a_plain_csv_keeps_its_own_convention(tmp_path: Path) -> None:
    """The same rows in a file that is not a Lightning metrics.csv count steps done."""
    (tmp_path / "run.csv").write_text(LIGHTNING_METRICS)
    (tmp_path / "runs.toml").write_text('[workload]\ntrain_steps = 20\n[[runs]]\nrun = "*"\n'
                                        "batch_size = 8\n")
    data = build(tmp_path / "run.csv", name="p/net/sgd", manifest=tmp_path / "runs.toml")
    assert [t.status for t in data.trials] == ["INCOMPLETE"]


GENERATE = """
import sys, torch, lightning as L
from lightning.pytorch.loggers import CSVLogger
class M(L.LightningModule):
    def __init__(self, lr=0.1, max_steps=20):
        super().__init__(); self.save_hyperparameters(); self.l = torch.nn.Linear(2, 1)
    def training_step(self, b, i):
        loss = torch.nn.functional.mse_loss(self.l(b[0]), b[1]); self.log("train_loss", loss)
        return loss
    def validation_step(self, b, i):
        self.log("val_loss", torch.nn.functional.mse_loss(self.l(b[0]), b[1]))
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
data = torch.utils.data.TensorDataset(torch.randn(64, 2), torch.randn(64, 1))
loader = torch.utils.data.DataLoader(data, batch_size=8)
L.Trainer(max_steps=20, logger=CSVLogger(sys.argv[1]), log_every_n_steps=5,
          val_check_interval=10, check_val_every_n_epoch=None, enable_checkpointing=False,
          enable_progress_bar=False, enable_model_summary=False,
          num_sanity_val_steps=0).fit(M(), loader, loader)
"""


@pytest.mark.slow
def test_a_log_written_by_lightning_itself(tmp_path: Path) -> None:
    """Train 20 steps with Lightning's own CSVLogger (the dev extra installs it) and import
    the log: its last row is at step 19, and the run is complete."""
    subprocess.run([sys.executable, "-c", GENERATE, str(tmp_path / "logs")], check=True,
                   capture_output=True, timeout=PATIENCE)
    (tmp_path / "runs.toml").write_text('[[runs]]\nrun = "*"\nbatch_size = 8\n')
    data = build(tmp_path / "logs", name="l/net/sgd", manifest=tmp_path / "runs.toml")
    assert [(t.status, t.steps) for t in data.trials] == [("COMPLETE", 19)]
    assert data.studies[0].train_steps == 20
