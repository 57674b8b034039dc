"""Conformance: ``curvekit add`` on real training logs written by other people.

The corpus lives beside the repository, in ``../shared/reallogs`` (or where the environment
variable ``CURVEKIT_REALLOGS`` says; its ``SOURCES.md`` names
each file's repository and commit; ``_test_manifests/`` holds the run manifests used with
them). It is never copied into the project; where it is absent this module is skipped, and
the rules it exercises are tested on generated look-alikes in ``tests/test_add_reallike.py``.

Each :class:`Source` entry writes down one import of one source: how it is called and what
must come out -- the trial count, rows, step range, metric names and statuses -- or the
refusal (fragments of its message). Fields left ``None`` are not checked.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from curvekit.errors import IngestError
from curvekit.ingest.add import build
from curvekit.ingest.runs import IngestWarning

# ../shared/reallogs from the repository root; CURVEKIT_REALLOGS points elsewhere
CORPUS = Path(os.environ.get("CURVEKIT_REALLOGS")
              or Path(__file__).resolve().parent.parent.parent / "shared" / "reallogs")
if not CORPUS.is_dir():
    pytest.skip(f"the corpus of real logs is absent ({CORPUS}); the rules are tested on "
                "look-alikes in tests/test_add_reallike.py", allow_module_level=True)


@dataclass(frozen=True)
class Source:
    """One import of a corpus source and its expected outcome."""

    path: str  # relative to the corpus
    manifest: str | None = None  # a file of _test_manifests/
    runs: str | None = None  # or a manifest's text, written beside the test (TOML)
    format: str = "auto"
    metric_map: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # expected outcome of an import
    trials: int | None = None
    rows: int | None = None
    steps: tuple[int, int] | None = None  # smallest and largest step of all trials
    metrics: frozenset[str] | None = None  # the metric columns of all trials together
    statuses: dict[str, int] | None = None
    warns: tuple[str, ...] = ()  # fragments of one IngestWarning each
    # expected refusal: fragments of the message (the file first)
    refused: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        extra = [f"{k}={getattr(self, k)}" for k in ("format", "metric_map", "include",
                                                          "exclude")
                 if getattr(self, k) not in ("auto", ())]
        given = [self.manifest] if self.manifest else [repr(self.runs)] if self.runs else []
        return " ".join([self.path, *given, *extra])


def _m(*names: str) -> frozenset[str]:
    return frozenset(names)


AI4MARS = ("train/classification_error", "train/loss",
           "train/mean_absolute_error", "val/classification_error", "val/loss",
           "val/mean_absolute_error")
ALGOPERF_EVAL = ("accumulated_eval_time", "accumulated_logging_time",
                 "accumulated_submission_time", "preemption_count", "score",
                 "test/loss", "test/num_examples", "test/ssim", "total_duration",
                 "train/loss", "train/ssim", "val/loss",
                 "val/num_examples", "val/ssim")

def _bs(batch_size: int, **workload: int) -> str:
    """A run manifest giving every run one batch size (and ``[workload]`` keys)."""
    table = "".join(f"{k} = {v}\n" for k, v in workload.items())
    return (f"[workload]\n{table}" if table else "") + \
        f'[[runs]]\nrun = "*"\nbatch_size = {batch_size}\n'


IRFANET_APPENDED = ("training_logs191017(2).log", "training_logs191017(3).log",
                    "training_logs191017(5).log", "training_logs211017.log",
                    "training_logs221017.log")
TESTTUBE_EMPTY = tuple(f"lightning_logs/version_{n}" for n in (1, 2, 3, 4))

SOURCES: list[Source] = [
    # PyTorch Lightning's CSVLogger
    # avg_test_*: the split word inside the name, so no split (see adding-workloads.md)
    Source("lightning/awritrojit-mnist/lightning_logs", "l1.toml", trials=8, rows=636,
           steps=(3, 9379),
           metrics=_m("avg_test_acc", "avg_test_loss", "test/classification_error",
                      "test/loss", "train/classification_error",
                      "train/classification_error_step", "train/loss",
                      "train/loss_step"),
           statuses={"COMPLETE": 2, "INCOMPLETE": 6}),
    Source("lightning/eve-opal-v2/lightning_logs", "l2.toml", trials=2, rows=203,
           steps=(49, 5431), metrics=_m("lr-Adam", "train/nll_loss", "val/rmse_loss"),
           statuses={"COMPLETE": 1, "INCOMPLETE": 1}),
    Source("lightning/goreg-probing/lightning_logs", "l3.toml", trials=5, rows=140,
           steps=(49, 1399),
           metrics=_m("train/classification_error", "train/loss"),
           statuses={"COMPLETE": 5}),
    Source("lightning/sajan-discharge/lightning_logs_discharge", "l4.toml", trials=5, rows=61,
           steps=(227, 3909), metrics=_m("train/loss", "val/loss"),
           statuses={"COMPLETE": 1, "INCOMPLETE": 4}),
    Source("lightning/felix-waste/lightning_logs", "l5.toml", trials=1, rows=1, steps=(0, 0),
           metrics=_m("test/classification_error", "test/loss"),
           statuses={"COMPLETE": 1}),
    # Keras's CSVLogger
    Source("keras/rkn2-cnnbricks", "k1.toml",
           refused=("model_history_log.csv, line 3", "epoch 0 appears twice",
                    "import the attempts as separate runs")),
    Source("keras/lidbey-ai4mars", "k2.toml", trials=3, rows=109, steps=(500, 41000),
           metrics=_m(*AI4MARS), statuses={"COMPLETE": 1, "INCOMPLETE": 2}),
    Source("keras/lidbey-ai4mars", "k2b.toml", trials=3, rows=109, steps=(502, 41164),
           metrics=_m(*AI4MARS), statuses={"COMPLETE": 1, "INCOMPLETE": 2}),
    Source("keras/lidbey-ai4mars-blank", "k1.toml",
           refused=("model_history_log.csv, line 1", "empty file",
                    "--exclude 'model_history_log.csv'")),
    Source("keras/hsdnn", "k1.toml",
           refused=("model_history_log2.csv, line 1", "empty file",
                    "--exclude 'model_history_log2.csv'")),
    Source("keras/hsdnn", "k1.toml", exclude=("model_history_log2.csv",), trials=1, rows=9,
           steps=(100, 900),
           metrics=_m("train/classification_error", "train/loss"),
           statuses={"COMPLETE": 1}),
    Source("keras/infinity052-driver", "k2.toml", trials=1, rows=10, steps=(500, 5000),
           metrics=_m("train/classification_error", "train/loss",
                      "val/classification_error", "val/loss"),
           statuses={"COMPLETE": 1}),
    # Weights & Biases exports from the web UI
    Source("wandb/druidowm-nanogpt", "w1.toml", trials=8, rows=1184, steps=(0, 385),
           metrics=_m("train/loss"), statuses={"COMPLETE": 1, "INCOMPLETE": 7}),
    Source("wandb/junyoung-snet", "w1.toml", metric_map=("epoch_id=step",), trials=14,
           rows=4214, steps=(0, 3000), metrics=_m("dataset_stats.S100_N30_m3_full.gap_mean"),
           statuses={"COMPLETE": 14}),
    # the chart's x axis epoch_id is no step: each run is placed by its own _step
    Source("wandb/junyoung-snet", "w1.toml", trials=14, rows=4214, steps=(1, 3301),
           metrics=_m("dataset_stats.S100_N30_m3_full.gap_mean"), statuses={"COMPLETE": 14},
           warns=("x axis 'epoch_id' is no step column", "--map 'epoch_id=step'")),
    Source("wandb/lucas-nanogpt-ablations/training_records", "w1.toml", metric_map=("Name=",),
           refused=("wandb_export.csv, line 1", "W&B runs table", "not a training history",
                    "--exclude 'wandb_export.csv'")),
    Source("wandb/lucas-nanogpt-ablations/training_records", "w1.toml",
           exclude=("wandb_export.csv",),
           refused=("metrics.csv, line 1", "no step column", "one row per run")),
    Source("wandb/oraby8-tts", "w2.toml", metric_map=("Name=",),
           refused=("wandb_export_2026-03-02T10_38_30.064+02_00.csv, line 1", "W&B runs table")),
    Source("wandb/oraby8-tts", "w2.toml", exclude=("wandb_export_*",), trials=1, rows=42,
           steps=(0, 41),
           metrics=_m("rewards/cer_std", "rewards/raw_cer_mean", "rewards/raw_sim_mean",
                      "rewards/sim_std", "rewards/total_mean", "rewards/total_std",
                      "train/avg_epoch_loss", "train/loss", "train/lr",
                      "train/skipped_batches", "train/step", "trainable_parameters",
                      "val/best_loss", "val/loss"),
           statuses={"COMPLETE": 1}),
    # TensorBoard (Lightning's TensorBoardLogger): its hp_metric placeholder (-1 at step 0)
    # is left out, so a run that logged nothing else is a trial without measurements; its
    # hparams.yaml names criterion: torch.nn.modules.loss.BCEWithLogitsLoss, so its losses
    # are the cross-entropy (every other source's config names no loss: train/loss, val/loss)
    Source("tensorboard/deep-lineary-gated/lightning_logs", trials=9, rows=2084,
           steps=(9, 2599),
           metrics=_m("train/classification_error", "train/cross_entropy_error",
                      "val/classification_error", "val/cross_entropy_error"),
           statuses={"COMPLETE": 4, "INCOMPLETE": 5}),
    Source("tensorboard/abdul-lstm/lightning_logs", "t2.toml", trials=1, rows=7719,
           steps=(49, 384597), metrics=_m("train/loss", "val/loss"),
           statuses={"COMPLETE": 1}),
    Source("tensorboard/elluito-resnet50/lightning_logs", "t5.toml", trials=7, rows=9,
           steps=(49, 351),
           metrics=_m("FLOPS", "val/classification_error", "val/loss"),
           statuses={"COMPLETE": 1, "INCOMPLETE": 6}),
    # Lightning 1.x: valid_loss_step/epoch_N counts validation batches, not steps: left out
    Source("tensorboard/atomscott-fractaldb/lightning_logs", "t5.toml", trials=1, rows=80,
           steps=(49, 3899),
           metrics=_m("train/loss", "train/loss_step",
                      "val/loss"),
           statuses={"COMPLETE": 1},
           warns=("left out 2 per-epoch series of per-batch values",)),
    # AlgoPerf: the trial folders hold the curve, a per-step log and TensorBoard files;
    # fastMRI's loss is an L1 (SSIM-scored) reconstruction loss, no cross-entropy: */loss
    Source("other/algoperf-amos-fastmri/fastmri_jax", "o1b.toml", trials=5, rows=377,
           steps=(1, 36189),
           metrics=_m("test/loss", "test/ssim", "train/loss",
                      "train/ssim", "val/loss", "val/ssim"),
           statuses={"COMPLETE": 2, "INCOMPLETE": 3},
           warns=("read as algoperf; not read: TensorBoard event files, measurements.csv",)),
    Source("other/algoperf-amos-fastmri/fastmri_jax", "o1.toml", format="csv", trials=5,
           rows=377, steps=(1, 36189), metrics=_m(*ALGOPERF_EVAL),
           statuses={"COMPLETE": 2, "INCOMPLETE": 3},
           warns=("skipped 5 AlgoPerf per-step log(s)",)),
    Source("other/algoperf-amos-fastmri/fastmri_jax", "o1b.toml", format="tensorboard",
           metric_map=("loss=minibatch_loss",), trials=5, rows=872, steps=(0, 36189),
           metrics=_m(*ALGOPERF_EVAL, "global_step", "grad_norm", "minibatch_loss"),
           statuses={"COMPLETE": 2, "INCOMPLETE": 3}),
    # MLflow autologging: one row per epoch with step = epoch
    Source("mlflow/awritrojit-mnist/mlruns", "m1.toml",
           refused=("counts epochs", "steps_per_epoch")),
    Source("mlflow/awritrojit-mnist/mlruns", "m1b.toml", refused=("final values",)),
    Source("mlflow/awritrojit-mnist/mlruns", "m1b.toml",
           metric_map=("avg_test_acc=", "avg_test_loss=", "test_acc=", "test_loss="),
           trials=4, rows=35, steps=(938, 9380),
           metrics=_m("train/classification_error", "train/classification_error_step",
                      "train/loss", "train/loss_step"),
           statuses={"COMPLETE": 3, "INCOMPLETE": 1}),
    Source("mlflow/imageclass-1010sb/mlruns", "m1.toml",
           refused=("final values only", "test_accuracy")),
    Source("mlflow/swahili-stt/mlruns/1", "m1.toml", format="mlflow",
           refused=("counts epochs",)),
    Source("mlflow/swahili-stt/mlruns/1", "m1b.toml", format="mlflow", trials=1, rows=10,
           steps=(938, 9380), metrics=_m("train/loss"),
           statuses={"COMPLETE": 1}),
    # TF2/Keras TensorBoard: per-epoch tags (epoch_loss, ...) on the epoch axis. TF1-era
    # Keras TensorBoard logs (loss, val_loss, ... at step = epoch) are not in the corpus
    # (irfanet-py2's logs*/ folders were not collected): tests/test_add_keras_tb.py writes
    # look-alikes of them
    Source("tensorboard/swahili-keras", "t3.toml", refused=("epoch_",)),
    Source("tensorboard/swahili-keras", "m1b.toml", trials=1, rows=10, steps=(938, 9380),
           metrics=_m("train/loss"), statuses={"COMPLETE": 1}),
    # Sacred's FileStorageObserver: run 1 is a search's parent (one value per metric); the
    # others log train metrics twice per epoch and valid/test once, by Sacred's own counters
    Source("sacred/catniplab-jsb/models",
           refused=("models/1/metrics.json", "holds no curve", "--exclude '1'")),
    Source("sacred/catniplab-jsb/models", exclude=("1",),
           refused=("models/11/metrics.json", "at different rates",
                    "--map 'testAccuracy=' --map 'testLoss=' --map 'validAccuracy=' "
                    "--map 'validLoss='")),
    Source("sacred/catniplab-jsb/models", exclude=("1",),
           metric_map=("trainLoss=", "trainAccuracy="),
           refused=("models/11", "counts epochs", "steps_per_epoch")),
    # JSB Chorales: 229 sequences in batches of 128, 2 steps per epoch (SOURCES.md)
    Source("sacred/catniplab-jsb/models", runs="[workload]\nsteps_per_epoch = 2\n",
           exclude=("1",), metric_map=("trainLoss=", "trainAccuracy="), trials=6, rows=900,
           steps=(2, 300),
           metrics=_m("testAccuracy", "testLoss", "validAccuracy", "validLoss"),
           statuses={"COMPLETE": 6}),
    Source("sacred/adbruijn-offensive/results",
           refused=("results/1/metrics.json", "COMPLETED but logged no metric to Sacred",
                    "--log-format csv", "--exclude '1'")),
    # DVCLive: Lightning's logger (the global step, an epoch series beside it) ...
    Source("dvclive/michaelvay-lightning", trials=1, rows=10, steps=(429, 4299),
           metrics=_m("train/classification_error", "train/loss",
                      "val/acc_best", "val/classification_error", "val/loss"),
           statuses={"COMPLETE": 1}),
    # ... and the Hugging Face callback, whose step counts its log calls
    Source("dvclive/alex000kim-hf",
           refused=("dvclive/plots/metrics", "no training step", "2.01 at step 0",
                    "trainer_state.json", "--log-format hf")),
    # timm: 0-based epochs of a run resumed at 1508; CIFAR-100 50,000 / 200 = 250 steps
    Source("timm/za101-volo", refused=("output/summary.csv", "counts epochs",
                                       "steps_per_epoch")),
    Source("timm/za101-volo", runs="[workload]\nsteps_per_epoch = 250\n", trials=1,
           rows=272, steps=(1509 * 250, 1780 * 250),
           metrics=_m("train/loss", "val/classification_error",
                      "val/loss", "val/top5"),
           statuses={"COMPLETE": 1}),
    # Ultralytics: the datasets' sizes are not in the repositories; coco128 is 8 steps
    Source("other/abonia-yolov8", refused=("runs/detect/train/results.csv", "counts epochs",
                                           "steps_per_epoch")),
    Source("other/abonia-yolov8", runs="[workload]\nsteps_per_epoch = 100\n",
           trials=1, rows=25, steps=(100, 2500),
           metrics=_m("lr/pg0", "lr/pg1", "lr/pg2", "metrics/mAP50(B)", "metrics/mAP50-95(B)",
                      "metrics/precision(B)", "metrics/recall(B)", "train/box_loss",
                      "train/cls_loss", "train/dfl_loss", "val/box_loss", "val/cls_loss",
                      "val/dfl_loss"),
           statuses={"COMPLETE": 1},
           warns=("read as ultralytics; not read: TensorBoard event files",)),
    Source("other/grafit-yolov5", include=("runs/train/exp",),
           runs="[workload]\nsteps_per_epoch = 8\n", trials=1, rows=3, steps=(8, 24),
           metrics=_m("metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "metrics/precision",
                      "metrics/recall", "train/box_loss", "train/cls_loss", "train/obj_loss",
                      "val/box_loss", "val/cls_loss", "val/obj_loss", "x/lr0", "x/lr1", "x/lr2"),
           statuses={"COMPLETE": 1}),
    Source("other/grafit-yolov5", refused=("runs/train/exp/results.csv", "counts epochs")),
    # DETR's log.txt: two 1-epoch runs appended, both at epoch 0
    Source("other/rhit-detr-jsonl", "k2.toml",
           refused=("output_dir/log.txt, line 2", "epoch 0 appears twice",
                    "import the attempts as separate runs")),
    # MLflow's SQLite store: runs logged with step = epoch (epochs = 5); two FAILED runs
    # logged nothing. MNIST 60,000 / 256 = 234 steps per epoch (app/main.py)
    Source("mlflow/doha-gans-sqlite",
           refused=("mlruns.db", "counts epochs", "epochs parameter is 5")),
    Source("mlflow/doha-gans-sqlite", runs="[workload]\nsteps_per_epoch = 234\n",
           trials=2, rows=10, steps=(234, 1170),
           metrics=_m("accuracy_fake", "accuracy_real", "discriminator_loss", "generator_loss"),
           statuses={"COMPLETE": 2}, warns=("left out 2 run(s) that logged no metric",)),
    # W&B run folders: 0.8's text history (a notebook run left 'running') ...
    Source("wandb/mfts-wandb08", trials=1, rows=196, steps=(0, 197),
           metrics=_m("cumulative_avg_reward", "episodic_reward"),
           statuses={"INCOMPLETE": 1}),
    # ... and 0.14's binary record only
    Source("wandb/aorvieto-rundirs",
           refused=("run-u1c25l6f.wandb", "binary", "wandb sync", "scan_history",
                    "--log-format wandb")),
    # Hugging Face Trainer: checkpoint-N/ copies of one history (each a prefix of the next)
    # are one run, read from its most complete copy; the callback's runs/ are not read
    Source("hf/hannibal-qlora", runs=_bs(8), trials=1, rows=1500, steps=(1, 1500),
           metrics=_m("learning_rate", "train/loss"), statuses={"COMPLETE": 1},
           warns=("read as hf; not read: TensorBoard event files",)),
    Source("hf/hannibal-qlora",
           refused=("checkpoint-1500/trainer_state.json", "has no batch size",
                    "batch_size = N")),
    Source("hf/subro-lora-agnews", trials=1, rows=24, steps=(100, 2400),
           metrics=_m("grad_norm", "learning_rate", "train/loss",
                      "val/classification_error", "val/loss"),
           statuses={"COMPLETE": 1}),  # global_step == max_steps
    Source("tensorboard/aguleon-hf-runs", runs=_bs(32), trials=1, rows=12, steps=(100, 1200),
           metrics=_m("grad_norm", "learning_rate", "train/loss",
                      "val/classification_error", "val/loss"),
           statuses={"COMPLETE": 1}, warns=("read as hf; not read: TensorBoard event files",)),
    Source("tensorboard/aguleon-hf-runs", runs=_bs(32), format="tensorboard", trials=5,
           rows=60, steps=(100, 1200), statuses={"COMPLETE": 5}),
    # Keras's CSVLogger: epochs on the step axis only with steps per epoch
    Source("keras/deepender-mnist", runs=_bs(128, steps_per_epoch=296), trials=1, rows=30,
           steps=(296, 8880),
           metrics=_m("learning_rate", "train/classification_error",
                      "train/loss", "val/classification_error",
                      "val/loss"), statuses={"COMPLETE": 1}),
    Source("keras/deepender-mnist", runs=_bs(128),
           refused=("training_log.csv", "counts epochs", "steps_per_epoch")),
    # CSVLogger(append=True) into training.log files: appended runs are named, all at once
    Source("keras/irfanet-py2", runs=_bs(8),
           refused=("training_logs191017(2).log, line 37", "epoch 0 appears twice",
                    "import the attempts as separate runs", "more problems in this import",
                    "training_logs221017.log")),
    Source("keras/irfanet-py2",
           runs=_bs(8, steps_per_epoch=50) + '[[runs]]\nrun = "training_logs191017(4)*"\n'
           'batch_size = 32\n', exclude=IRFANET_APPENDED, trials=4, rows=104, steps=(50, 2750),
           metrics=_m("train/classification_error", "train/loss",
                      "val/classification_error", "val/loss"),
           statuses={"COMPLETE": 2, "INCOMPLETE": 2}),
    # Lightning's CSVLogger: train and validation rows of one step merged
    Source("lightning/amitbatikoff-quantile", runs=_bs(128), trials=9, rows=446,
           steps=(0, 309), metrics=_m("train/loss", "val/loss"),
           statuses={"COMPLETE": 2, "INCOMPLETE": 7}),
    Source("lightning/insitro-kindel", runs=_bs(32), trials=40, rows=1700, steps=(49, 2499),
           metrics=_m("train/loss", "val/loss"),
           statuses={"COMPLETE": 25, "INCOMPLETE": 15}),
    # Lightning 0.6's TestTubeLogger: meta_tags.csv gives batch sizes; tf/ is a copy
    Source("lightning/jhko725-testtube",
           refused=("lightning_logs/version_1/metrics.csv, line 1", "empty file",
                    "--exclude 'lightning_logs/version_1/metrics.csv'",
                    "and 3 more problems in this import", "version_4/metrics.csv")),
    Source("lightning/jhko725-testtube", exclude=TESTTUBE_EMPTY,
           refused=("metrics.csv", "counts epochs", "steps_per_epoch")),
    Source("lightning/jhko725-testtube", runs="[workload]\nsteps_per_epoch = 5\n",
           exclude=TESTTUBE_EMPTY, trials=5, rows=4366, steps=(5, 7405),
           metrics=_m("train/loss"), statuses={"COMPLETE": 3, "INCOMPLETE": 2},
           warns=("read as csv; not read: TestTube's TensorBoard copy",)),
    # MLflow 1.x file store: every point at step 0, ordered by time only
    Source("mlflow/toma-wheat/mlruns", runs=_bs(8),
           refused=("metrics/train/loss, line 2", "are at step 0", "step=",
                    "1 more problem in this import")),
    # TF1 Estimator: eval/ is the validation of the run in its parent folder
    Source("tensorboard/camilo-tf1-estimator", runs=_bs(128), trials=1, rows=23,
           steps=(1, 2200),
           metrics=_m("dnn/dnn/hiddenlayer_0_fraction_of_zero_values",
                      "dnn/dnn/hiddenlayer_1_fraction_of_zero_values",
                      "dnn/dnn/hiddenlayer_2_fraction_of_zero_values",
                      "dnn/dnn/logits_fraction_of_zero_values", "global_step/sec",
                      "train/loss", "val/classification_error",
                      "val/loss"), statuses={"COMPLETE": 1}),
    # Lightning's TensorBoardLogger with hparams (no batch size among them)
    Source("tensorboard/ender-satd-pl", runs=_bs(8), trials=1, rows=480, steps=(0, 264959),
           metrics=_m("lr-SGD", "train/loss", "val/ExpRate",
                      "val/loss"), statuses={"COMPLETE": 1}),
    Source("tensorboard/ender-satd-pl",
           refused=("lightning_logs/version_0", "has no batch size", "batch_size = N")),
    # TF2 Keras train/ + validation/, and the HParams plugin's sessions (one value each)
    Source("tensorboard/mrdbourke-tf2-keras", runs=_bs(250),
           refused=("stevesCode/logs", "epoch_", "steps_per_epoch")),
    Source("tensorboard/mrdbourke-tf2-keras", runs=_bs(250, steps_per_epoch=160),
           exclude=("hparam_tuning",), trials=1, rows=2, steps=(160, 320),
           metrics=_m("train/classification_error", "train/loss",
                      "val/classification_error", "val/loss"),
           statuses={"COMPLETE": 1}),
    Source("tensorboard/mrdbourke-tf2-keras", runs=_bs(16), include=("hparam_tuning",),
           trials=4, rows=4, steps=(1, 1), metrics=_m("train/classification_error"),
           statuses={"COMPLETE": 4}),
]


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.id)
def test_real_logs(source: Source, tmp_path: Path) -> None:
    path = CORPUS / source.path
    manifest = CORPUS / "_test_manifests" / source.manifest if source.manifest else None
    if source.runs is not None:
        manifest = tmp_path / "runs.toml"
        manifest.write_text(source.runs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IngestWarning)
        call = lambda: build(path, name="real/corpus/opt", format=source.format,  # noqa: E731
                             manifest=manifest, metric_map=list(source.metric_map),
                             include=source.include, exclude=source.exclude)
        if source.refused:
            with pytest.raises(IngestError) as info:
                call()
            message = str(info.value)
            assert message.startswith(str(CORPUS)), message
            for fragment in source.refused:
                assert fragment in message, message
            return
        data = call()
    tables = list(data.measurements.values())
    steps = [s for t in tables for s in t.column("step").to_pylist()]
    metrics = frozenset(c for t in tables for c in t.column_names) - {"step"}
    got = {"trials": len(data.trials), "rows": sum(t.num_rows for t in tables),
           "steps": (min(steps), max(steps)), "metrics": metrics,
           "statuses": dict(Counter(t.status for t in data.trials))}
    for field, value in got.items():
        expected = getattr(source, field)
        if expected is not None:
            assert value == expected, f"{field}: {value!r} != {expected!r}"
    messages = [str(w.message) for w in caught if issubclass(w.category, IngestWarning)]
    for fragment in source.warns:
        assert any(fragment in m for m in messages), messages


PENDING: frozenset[str] = frozenset()
"""Sources of the corpus whose expected outcome is not written down yet. This list only
shrinks: a source leaves it when it gets its :data:`SOURCES` entry."""


def test_every_source_of_the_corpus_is_known() -> None:
    """A source added to the corpus needs an entry here (or, for now, in PENDING)."""
    groups = {"/".join(p.parent.relative_to(CORPUS).parts[:2]) for p in CORPUS.rglob("*")
              if p.is_file() and not p.relative_to(CORPUS).parts[0].startswith("_")
              and len(p.relative_to(CORPUS).parts) > 2}
    covered = {"/".join(s.path.split("/")[:2]) for s in SOURCES}
    assert groups - covered - PENDING == set()
    assert PENDING & covered == set(), "a source with an entry leaves PENDING"
    assert PENDING.issubset(groups), "PENDING names only sources of the corpus"


def _stored(data: object, metric: str) -> list[tuple[int, float]]:
    tables = data.measurements.values()  # type: ignore[attr-defined]
    return sorted((row["step"], row[metric]) for t in tables for row in t.to_pylist()
                  if row.get(metric) is not None)


def _built(path: str, tmp_path: Path, manifest_text: str | None = None,
           **options: object) -> object:
    manifest = None
    if manifest_text is not None:
        manifest = tmp_path / "runs.toml"
        manifest.write_text(manifest_text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        return build(CORPUS / path, name="real/corpus/opt", manifest=manifest,
                     **options)  # type: ignore[arg-type]


def test_new_formats_store_the_files_values(tmp_path: Path) -> None:
    """The values stored from the new formats' corpus sources are the files' own, at the
    steps their axes say (read here with json, csv and sqlite3 directly)."""
    import csv
    import json
    import sqlite3

    # Sacred: validLoss of run 6, epoch e at step (e + 1) x 2
    data = _built("sacred/catniplab-jsb/models", tmp_path, "[workload]\nsteps_per_epoch = 2\n",
                  exclude=["1", "7", "11", "12", "16", "17"],
                  metric_map=["trainLoss=", "trainAccuracy="])
    logged = json.loads((CORPUS / "sacred/catniplab-jsb/models/6/metrics.json").read_text())
    assert _stored(data, "validLoss") == [
        ((s + 1) * 2, v) for s, v in zip(logged["validLoss"]["steps"],
                                         logged["validLoss"]["values"], strict=True)]
    # MLflow SQLite: generator_loss of every run, step e -> (e + 1) x 234
    data = _built("mlflow/doha-gans-sqlite", tmp_path, "[workload]\nsteps_per_epoch = 234\n")
    con = sqlite3.connect(f"file:{CORPUS / 'mlflow/doha-gans-sqlite/mlruns.db'}?mode=ro",
                          uri=True)
    rows = con.execute("SELECT step, value FROM metrics WHERE key = 'generator_loss'").fetchall()
    con.close()
    assert _stored(data, "generator_loss") == sorted(((s + 1) * 234, v) for s, v in rows)
    # W&B 0.8: episodic_reward at its _step
    data = _built("wandb/mfts-wandb08", tmp_path)
    lines = [json.loads(line) for line in
             (CORPUS / "wandb/mfts-wandb08/wandb/wandb-history.jsonl").read_text().splitlines()]
    assert _stored(data, "episodic_reward") == [
        (r["_step"], r["episodic_reward"]) for r in lines if "episodic_reward" in r]
    # timm: eval_top1 in percent -> 1 - top1 / 100
    data = _built("timm/za101-volo", tmp_path, "[workload]\nsteps_per_epoch = 250\n")
    with open(CORPUS / "timm/za101-volo/output/summary.csv") as fh:
        summary = list(csv.DictReader(fh))
    assert _stored(data, "val/classification_error") == [
        ((int(r["epoch"]) + 1) * 250, 1 - float(r["eval_top1"]) / 100) for r in summary]
    # Ultralytics: the padded cells, 0-based epochs
    data = _built("other/abonia-yolov8", tmp_path, "[workload]\nsteps_per_epoch = 100\n")
    text = (CORPUS / "other/abonia-yolov8/runs/detect/train/results.csv").read_text()
    table = [[c.strip() for c in line.split(",")] for line in text.splitlines()]
    column = table[0].index("val/box_loss")
    assert _stored(data, "val/box_loss") == [((int(r[0]) + 1) * 100, float(r[column]))
                                             for r in table[1:]]
    # DVCLive (Lightning): val/loss at the logged steps
    data = _built("dvclive/michaelvay-lightning", tmp_path)
    tsv = (CORPUS / "dvclive/michaelvay-lightning/dvclive/plots/metrics/val/loss.tsv"
           ).read_text().splitlines()[1:]
    assert _stored(data, "val/loss") == [
        (int(s), float(v)) for s, v in (line.split("\t") for line in tsv)]


def test_a_loss_is_the_cross_entropy_only_where_the_sources_config_says_so() -> None:
    """Of the corpus's configurations, deep-lineary-gated's hparams.yaml alone names its loss
    (criterion: BCEWithLogitsLoss): its losses are the cross-entropy, by that parameter. The
    AlgoPerf fastMRI trials (an L1 loss) say nothing: their losses are */loss."""
    from curvekit.ingest.add import add_plan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        plan = add_plan(CORPUS / "tensorboard/deep-lineary-gated/lightning_logs",
                        name="real/corpus/opt")
        fastmri = add_plan(CORPUS / "other/algoperf-amos-fastmri/fastmri_jax",
                           name="real/corpus/opt",
                           manifest=CORPUS / "_test_manifests" / "o1b.toml")
    whys = {m.why for r in plan.runs for m in r.metrics if m.stored.endswith("_error")
            and "cross_entropy" in m.stored}
    assert whys == {"the cross-entropy: its parameter 'criterion' = "
                    "'torch.nn.modules.loss.BCEWithLogitsLoss' names a cross-entropy loss"}
    losses = {(m.logged, m.stored) for r in fastmri.runs for m in r.metrics if m.why}
    assert losses == {("train/loss", "train/loss"), ("validation/loss", "val/loss"),
                      ("test/loss", "test/loss")}


PLANNED = [s for s in SOURCES if not s.refused and s.path in (
    "tensorboard/deep-lineary-gated/lightning_logs", "hf/hannibal-qlora",
    "wandb/druidowm-nanogpt", "mlflow/awritrojit-mnist/mlruns", "lightning/eve-opal-v2/"
    "lightning_logs", "other/algoperf-amos-fastmri/fastmri_jax")]


@pytest.mark.parametrize("source", PLANNED, ids=lambda s: s.id)
def test_the_plan_names_every_file_read(source: Source, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``add --dry-run`` names, under the runs it makes, every file the import read."""
    from curvekit.ingest.add import add_plan
    from curvekit.ingest.files import SourceFiles

    read: list[str] = []
    original = SourceFiles.read
    monkeypatch.setattr(SourceFiles, "read",
                        lambda self: read.extend(original(self)) or original(self))
    manifest = CORPUS / "_test_manifests" / source.manifest if source.manifest else None
    if source.runs is not None:
        manifest = tmp_path / "runs.toml"
        manifest.write_text(source.runs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        plan = add_plan(CORPUS / source.path, name="real/corpus/opt", format=source.format,
                        manifest=manifest, metric_map=list(source.metric_map),
                        include=source.include, exclude=source.exclude)
    named = {f for run in plan.runs for f in run.files}
    assert read and set(read) == named | set(plan.unused), sorted(set(read) - named)
    assert not named & set(plan.unused)
    assert all(run.path in run.files or any(f.startswith(run.path + os.sep)
                                            for f in run.files) for run in plan.runs)
