"""Make the frozen store of format 1 that tests/test_upgrade.py upgrades.

Run with the code of the last commit that wrote format 1 on the import path, from a folder
outside the repository (``python -m`` and ``-c`` put the working folder first)::

    git worktree add --detach /tmp/format1-code <commit before store_format 2>
    cd /tmp && PYTHONPATH=/tmp/format1-code python /path/to/tests/format1/make.py

It converts ``tiny_archive`` (the release's layout and quirks), adds a CSV
workload with a metric and metaparameters of its own (``optimizer``, which format 1 stored
as ``param_optimizer``; an integer, a string), and copies the snapshot into
``tests/format1/store`` with the answers that code gave (``answers.json``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import curvekit
from curvekit.store.layout import STORE_FORMAT

try:
    from curvekit.release.synthetic import tiny_archive
except ImportError:  # where the generator lived before
    from curvekit.testing import tiny_archive  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
MINE = "mine/cnn/sgd"


def main() -> None:
    assert STORE_FORMAT == 1, "run with the code of the last commit that wrote format 1"
    tmp = Path(tempfile.mkdtemp())
    archive = tmp / "tiny.tar.bz2"
    manifest = tiny_archive(archive)
    home = tmp / "home"
    curvekit.fetch(home=home, archive=archive, manifest=manifest)
    logs = tmp / "logs"
    logs.mkdir()
    entries = []
    for i, bs in enumerate((32, 64)):
        rows = [f"{s},{0.9 / (1 + s / 100)!r},{0.5 / (1 + s / 50)!r}" for s in range(0, 500, 50)]
        (logs / f"bs{bs}.csv").write_text(
            "step,val/classification_error,val/top5_error\n" + "\n".join(rows) + "\n")
        entries.append(f'[[runs]]\nrun = "bs{bs}.csv"\nbatch_size = {bs}\n'
                       f'parameters = {{ learning_rate = {0.1 * (i + 1)!r}, '
                       f'max_steps = {900 + 300 * i}, schedule = "cosine", '
                       f'optimizer = "adam" }}\n')
    (logs / "runs.toml").write_text("".join(entries))
    curvekit.add(logs, name=MINE, manifest=logs / "runs.toml", home=home)
    store = curvekit.open(home)
    answers = {}
    for workload in store.workloads():
        metric = "val/classification_error" if "val/classification_error" in store.metrics(
            workload) else store.metrics(workload)[0]
        maximize = "precision" in metric
        best = curvekit.best(store, curvekit.Selection(workload, metric, maximize=maximize),
                             explain=False)
        goal = float(best[metric].median())  # type: ignore[arg-type]
        steps = curvekit.steps_to_result(
            store, curvekit.Selection(workload, metric, goal, maximize=maximize), explain=False)
        answers[workload] = {"metric": metric, "goal": goal, "maximize": maximize,
                             "best": best.write_json(), "steps": steps.write_json(),
                             "metrics": store.metrics(workload)}
    target = HERE / "store"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(store.path, target, ignore=shutil.ignore_patterns(".lease"))
    (HERE / "answers.json").write_text(json.dumps(answers, indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
