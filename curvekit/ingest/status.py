"""A run's status, decided the way the release decides it.

* **INFEASIBLE**: its loss became NaN or infinite (the run diverged). Loss columns are the
  ``*/cross_entropy_error`` and ``*/loss`` columns and any logged metric with ``loss`` in
  its name.
* **INCOMPLETE**: it stopped before the study's step budget: the training steps it did are
  fewer than ``train_steps``. Steps done follow the logger's convention: the last logged
  step itself for loggers that log the number of steps done (the release, Keras, plain
  CSVs, TensorBoard, MLflow, W&B), the last step + 1 for PyTorch Lightning, whose
  ``step`` is the 0-based index of the batch just trained (``step_offset=1``: a run of
  ``max_steps=1000`` logs its last row at step 999). A budget of 0 means the study had a
  time budget, as in the release: every run that did not diverge is then COMPLETE.
* **INCOMPLETE** too: the logger's own record says the run did not finish (Sacred's
  ``FAILED``, ``INTERRUPTED``, ``RUNNING``; MLflow's ``FAILED``, ``KILLED``, ``RUNNING``;
  a W&B run folder's ``running``, ``failed``, ``killed``, ``crashed``), whatever its
  length: a run that crashed or was killed is never COMPLETE.
* **COMPLETE** otherwise.

A status given in the run manifest wins over all three.

>>> import polars as pl
>>> frame = pl.DataFrame({"step": [0, 100], "val/cross_entropy_error": [2.3, float("nan")]})
>>> decide(frame, {"val/cross_entropy_error": "val_loss"}, budget=100)
'INFEASIBLE'
>>> decide(frame.head(1), {"val/cross_entropy_error": "val_loss"}, budget=100)
'INCOMPLETE'
>>> lightning = pl.DataFrame({"step": [49, 99], "val/cross_entropy_error": [2.3, 2.1]})
>>> decide(lightning, {}, budget=100), decide(lightning, {}, budget=100, step_offset=1)
('INCOMPLETE', 'COMPLETE')
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

__all__ = ["decide", "explain", "loss_columns"]


def loss_columns(sources: Mapping[str, str]) -> list[str]:
    """The columns (new names) that hold a loss, given new name -> logged name."""
    return [new for new, old in sources.items()
            if new.endswith(("cross_entropy_error", "/loss")) or "loss" in old.lower()]


def decide(frame: pl.DataFrame, sources: Mapping[str, str], budget: int,
           override: str | None = None, *, step_offset: int = 0,
           finished: bool | None = None) -> str:
    """The status of a run with rows ``frame`` (``step`` and metric columns), whose logger
    has done ``step + step_offset`` training steps when it logs a row at ``step``;
    ``finished`` is False where the logger records that the run did not finish.

    >>> decide(pl.DataFrame({"step": [100], "loss": [0.5]}), {}, 100, finished=False)
    'INCOMPLETE'
    """
    if override is not None:
        return override
    losses = loss_columns(sources)
    if losses and frame.height and bool(
            frame.select(pl.any_horizontal((~pl.col(c).is_finite()).fill_null(False).any()
                                           for c in losses)).item()):
        return "INFEASIBLE"
    if finished is False:
        return "INCOMPLETE"
    last = int(frame.get_column("step").max() or 0) if frame.height else 0  # type: ignore[arg-type]
    if budget > 0 and last + step_offset < budget:
        return "INCOMPLETE"
    return "COMPLETE"


def explain(frame: pl.DataFrame, sources: Mapping[str, str], budget: int,
            override: str | None = None, *, step_offset: int = 0,
            finished: bool | None = None, finished_why: str = "") -> str:
    """Why :func:`decide` gives the status it gives, in words (for the import plan).

    >>> explain(pl.DataFrame({"step": [0, 50]}), {}, budget=100)
    'stopped at 50 steps done, before the budget of 100 steps'
    """
    status = decide(frame, sources, budget, override, step_offset=step_offset,
                    finished=finished)
    if override is not None:
        return "given in the manifest"
    if status == "INFEASIBLE":
        bad = [c for c in loss_columns(sources) if frame.height and bool(
            frame.select((~pl.col(c).is_finite()).fill_null(False).any()).item())]
        return f"its loss {bad[0]!r} became NaN or infinite (the run diverged)"
    if finished is False:
        return f"the log records that it did not finish ({finished_why or 'not finished'})"
    last = int(frame.get_column("step").max() or 0) if frame.height else 0  # type: ignore[arg-type]
    done = last + step_offset
    if budget == 0:
        return "a time budget (train_steps = 0): every run that did not diverge is complete"
    if status == "INCOMPLETE":
        return f"stopped at {done} steps done, before the budget of {budget} steps"
    return f"{done} steps done reach the budget of {budget} steps"
