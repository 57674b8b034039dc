"""Benchmark: where the batched trainer's time goes on this CPU, against its arithmetic floor.

Three measurements at a few batch sizes of the demo's network (``fc_128_128_128`` on the
digits, 24 trials, one CPU thread), each the best of ``--repeat`` runs:

* **training steps**: the demo's first 24 sgd trials, 300 steps with an evaluation at 0,
  150 and 300 only, trained together (``train_trials``) and one by one (``run_trial``);
* **the stacked floor**: the least a step of 24 stacked trials can cost here: a forward and
  backward pass of the stacked layers (``torch.baddbmm``) and a plain SGD update, with no
  data gathering, schedule or divergence check;
* **the single floor**: the same minimal step for one trial (``torch.addmm``);
* **an evaluation**: the 24 trials set up and evaluated once on every split (1,797
  examples, a step budget of 0), together and one by one, per trial.

``training steps`` batched near ``the stacked floor`` means the trainer adds little of its
own; ``the stacked floor`` against one by one bounds what batching can gain on this CPU.

Usage::

    python benchmarks/batched_floor.py              # batch sizes 2, 8, 64 and 1,197
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import save

TRIALS = 24
WIDTHS = (64, 128, 128, 128, 10)  # digits' 64 pixels through fc_128_128_128 to 10 classes


def _best(fn: Callable[[], int], repeat: int) -> tuple[float, int]:
    """The least of ``repeat`` timings of ``fn``, and what it returned (steps taken)."""
    times, result = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def floor_step(trials: int, batch: int, steps: int) -> float:
    """Seconds per step of the minimal stacked (``trials`` > 1) or single training step."""
    import torch
    import torch.nn.functional as F

    pairs = list(itertools.pairwise(WIDTHS))
    if trials > 1:
        weights = [(torch.randn(trials, i, o) * 0.1).requires_grad_() for i, o in pairs]
        biases = [torch.zeros(trials, 1, o, requires_grad=True) for _, o in pairs]
        x = torch.randn(trials, batch, WIDTHS[0])
        y = torch.randint(0, 10, (trials * batch,))
    else:
        weights = [(torch.randn(i, o) * 0.1).requires_grad_() for i, o in pairs]
        biases = [torch.zeros(o, requires_grad=True) for _, o in pairs]
        x = torch.randn(batch, WIDTHS[0])
        y = torch.randint(0, 10, (batch,))
    params = weights + biases

    def step() -> None:
        h = x
        for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
            h = torch.baddbmm(b, h, w) if trials > 1 else torch.addmm(b, h, w)
            if i < len(weights) - 1:
                h = torch.relu(h)
        loss = F.cross_entropy(h.reshape(-1, WIDTHS[-1]), y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p.sub_(g, alpha=0.01)

    for _ in range(10):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def _together(specs: list) -> int:
    from curvekit.runner.batched import train_trials

    return sum(r.steps for r in train_trials(specs))


def _one_by_one(specs: list) -> int:
    from curvekit.runner.train import run_trial

    return sum(run_trial(spec).steps for spec in specs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="2,8,64,1197")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    import torch

    from curvekit.runner.plan import Sweep
    from curvekit.runner.train import _data, run_trial

    torch.set_num_threads(1)
    rows = []
    print(f"{'batch':>6} {'batched':>10} {'one by one':>11} {'ratio':>6} "
          f"{'stacked floor':>14} {'single floor':>13}   (ms per trial-step)"
          f"  {'evaluation, together / alone':>29} (ms per trial)")
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        sweep = Sweep.create("demo/digits", dataset="digits", model="fc_128_128_128",
                             optimizers=["sgd"], batch_sizes=[batch], trials=TRIALS,
                             steps=1000, eval_every=10, seed=0)
        specs = [replace(s, steps=300, eval_every=150) for s in sweep.trial_specs()]
        _data(specs[0], "cpu")
        run_trial(specs[0])  # PyTorch's first-use costs, paid before any timing
        b_s, b_steps = _best(partial(_together, specs), args.repeat)
        o_s, o_steps = _best(partial(_one_by_one, specs), args.repeat)
        taken = {"batched": b_steps, "one": o_steps}
        at_start = [replace(s, steps=0) for s in specs]
        eval_b = _best(partial(_together, at_start), args.repeat)[0] / TRIALS
        eval_o = _best(partial(_one_by_one, at_start), args.repeat)[0] / TRIALS
        n = 20 if batch > 512 else 200
        row = {
            "batch_size": batch,
            "batched_ms_per_trial_step": 1e3 * b_s / taken["batched"],
            "one_ms_per_trial_step": 1e3 * o_s / taken["one"],
            "stacked_floor_ms_per_trial_step": 1e3 * floor_step(TRIALS, batch, n) / TRIALS,
            "single_floor_ms_per_step": 1e3 * floor_step(1, batch, 5 * n),
            "evaluation_ms_per_trial_batched": 1e3 * eval_b,
            "evaluation_ms_per_trial_one": 1e3 * eval_o,
            "trial_steps": taken,
        }
        row["ratio"] = row["one_ms_per_trial_step"] / row["batched_ms_per_trial_step"]
        rows.append(row)
        print(f"{batch:>6} {row['batched_ms_per_trial_step']:>10.3f} "
              f"{row['one_ms_per_trial_step']:>11.3f} {row['ratio']:>6.2f} "
              f"{row['stacked_floor_ms_per_trial_step']:>14.3f} "
              f"{row['single_floor_ms_per_step']:>13.3f}"
              f"{row['evaluation_ms_per_trial_batched']:>26.2f} / "
              f"{row['evaluation_ms_per_trial_one']:.2f}", flush=True)
    out = save("batched-floor", {"load_average": os.getloadavg(), "torch": torch.__version__,
                                 "config": torch.__config__.show(), "rows": rows})
    print(f"results in {out}")


if __name__ == "__main__":
    main()
