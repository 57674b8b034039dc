"""A run's status, decided the way the release decides it.

* **INFEASIBLE**: its loss became NaN or infinite (the run diverged). Loss columns are the
  ``*/cross_entropy_error`` columns and any logged metric with ``loss`` in its name.
* **INCOMPLETE**: it stopped before the study's step budget (its last step is below
  ``train_steps``). A budget of 0 means the study had a time budget, as in the release:
  every run that did not diverge is then COMPLETE.
* **COMPLETE** otherwise.

A status given in the run manifest wins over all three.

>>> import polars as pl
>>> frame = pl.DataFrame({"step": [0, 100], "val/cross_entropy_error": [2.3, float("nan")]})
>>> decide(frame, {"val/cross_entropy_error": "val_loss"}, budget=100)
'INFEASIBLE'
>>> decide(frame.head(1), {"val/cross_entropy_error": "val_loss"}, budget=100)
'INCOMPLETE'
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

__all__ = ["decide", "loss_columns"]


def loss_columns(sources: Mapping[str, str]) -> list[str]:
    """The columns (new names) that hold a loss, given new name -> logged name."""
    return [new for new, old in sources.items()
            if new.endswith("cross_entropy_error") or "loss" in old.lower()]


def decide(frame: pl.DataFrame, sources: Mapping[str, str], budget: int,
           override: str | None = None) -> str:
    """The status of a run with rows ``frame`` (``step`` and metric columns)."""
    if override is not None:
        return override
    losses = loss_columns(sources)
    if losses and frame.height and bool(
            frame.select(pl.any_horizontal((~pl.col(c).is_finite()).fill_null(False).any()
                                           for c in losses)).item()):
        return "INFEASIBLE"
    last = int(frame.get_column("step").max() or 0) if frame.height else 0  # type: ignore[arg-type]
    if budget > 0 and last < budget:
        return "INCOMPLETE"
    return "COMPLETE"
