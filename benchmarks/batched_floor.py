"""Benchmark: where the batched trainer's time goes on this CPU, and the most it could gain.

For every batch size of the demo (``fc_128_128_128`` on the digits, its sgd trials, one CPU
thread), the batched trainer (``train_trials``) and the one-by-one trainer (``run_trial``)
are timed on the same trials, best of ``--repeat``, three ways each:

* ``short`` steps and ``long`` steps with an evaluation only at the first and last step:
  their difference is the cost of a **training step** (ms per trial-step), free of the
  set-up and the evaluations;
* ``long`` steps with an evaluation every 10 steps (the demo's protocol): the difference
  from the run without is the cost of an **evaluation** (ms per trial; every split, 1,797
  examples).

From those, a demo study's time per trial is ``budget × step + evaluations × evaluation``
for each trainer, and their ratio is what batching gains on a whole study.

**The arithmetic bound.** A trainer that follows the protocol does at least its arithmetic:
for a trial of the demo, ``budget × batch size`` examples through the network forward and
backward (the products of the forward pass, of the weights' gradients and of the inputs'
gradients below the first layer) and ``evaluations × 1,797`` examples forward. At this
machine's best single-thread matrix-product rate (measured here: a 2,048³ float32 product)
that takes a least time; the one-by-one trainer's time divided by it is the most any trainer
could gain over one by one on this machine, however it batches. The element-wise work
(activations, the loss, the update) is left out of the least time, so the bound is generous.

**torch.compile** (``--compile``): the least stacked step of 24 trials (forward and backward
through ``torch.baddbmm``, plus a plain SGD update), eager against its forward and
backward compiled by ``torch.compile``, per trial-step, with the compilation's own time.

Usage::

    python benchmarks/batched_floor.py              # every batch size of the demo
    python benchmarks/batched_floor.py --batch-sizes 2,64,1197 --repeat 3
    python benchmarks/batched_floor.py --compile    # torch.compile on this CPU
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import save

WIDTHS = (64, 128, 128, 128, 10)  # digits' 64 pixels through fc_128_128_128 to 10 classes
EVAL_EXAMPLES = 1797  # train + val + test of the digits
EVAL_EVERY = 10


def flops_per_example() -> tuple[int, int]:
    """(training, evaluation) floating-point operations per example of the demo's network:
    the matrix products only (2 per multiply-add)."""
    products = [i * o for i, o in itertools.pairwise(WIDTHS)]
    forward = 2 * sum(products)
    # Backward: every weight's gradient, and the inputs' gradients of all but the first
    # layer (the data need none).
    return forward + 2 * sum(products) + 2 * sum(products[1:]), forward


def peak_gflops(repeat: int = 3) -> float:
    """The best single-thread float32 matrix-product rate here, in GFLOP/s."""
    import torch

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    best = min(_seconds(lambda: a @ b) for _ in range(repeat))
    return 2 * 2048**3 / best / 1e9


def _seconds(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _together(specs: Sequence[Any]) -> None:
    from curvekit.runner.batched import train_trials

    train_trials(specs)


def _one_by_one(specs: Sequence[Any]) -> None:
    from curvekit.runner.train import run_trial

    for spec in specs:
        run_trial(spec)


def measure(batch: int, repeat: int) -> dict[str, Any]:
    """Step and evaluation costs of both trainers at ``batch`` (see the docstring)."""
    from curvekit.runner.demo import DEMO_SWEEP
    from curvekit.runner.plan import Sweep
    from curvekit.runner.train import _data

    small = batch <= 256
    trials, short, long = (24, 100, 300) if small else (6, 20, 60)
    sweep = Sweep.create("demo/digits", dataset="digits", model=DEMO_SWEEP["model"],
                         optimizers=["sgd"], batch_sizes=[batch], trials=trials,
                         steps=DEMO_SWEEP["steps"][batch], eval_every=EVAL_EVERY,
                         seed=DEMO_SWEEP["seed"])
    base = sweep.trial_specs()
    _data(base[0], "cpu")

    def specs(steps: int, every: int) -> list[Any]:
        return [replace(s, steps=steps, eval_every=every) for s in base]

    runs = {"short": specs(short, 10**9), "long": specs(long, 10**9),
            "evaluated": specs(long, EVAL_EVERY)}
    trainers = {"batched": _together, "one": _one_by_one}
    for train in trainers.values():  # PyTorch's first-use costs, paid before any timing
        train(specs(EVAL_EVERY, EVAL_EVERY)[:2])
    best: dict[str, dict[str, float]] = {name: {} for name in trainers}
    for _ in range(repeat):  # alternating, so that both see the same load
        for run, trial_specs in runs.items():
            for name, train in trainers.items():
                took = _seconds(partial(train, trial_specs))
                best[name][run] = min(best[name].get(run, took), took)
    extra_evaluations = long // EVAL_EVERY - 1  # the evaluated run's, less the first and last
    row: dict[str, Any] = {"batch_size": batch, "trials": trials, "steps": [short, long]}
    for name, t in best.items():
        row[f"{name}_step_ms"] = 1e3 * (t["long"] - t["short"]) / (long - short) / trials
        row[f"{name}_evaluation_ms"] = (1e3 * (t["evaluated"] - t["long"])
                                        / extra_evaluations / trials)
    return row


def study_model(row: dict[str, Any], budget: int, peak: float) -> None:
    """Adds a demo study's time per trial by each trainer, their ratio and the bound."""
    train_flops, eval_flops = flops_per_example()
    evaluations = budget // EVAL_EVERY + 1
    for name in ("batched", "one"):
        row[f"{name}_study_s"] = 1e-3 * (budget * row[f"{name}_step_ms"]
                                         + evaluations * row[f"{name}_evaluation_ms"])
    least = (budget * row["batch_size"] * train_flops
             + evaluations * EVAL_EXAMPLES * eval_flops) / (peak * 1e9)
    row.update(budget=budget, evaluations=evaluations, least_study_s=least,
               step_ratio=row["one_step_ms"] / row["batched_step_ms"],
               evaluation_ratio=row["one_evaluation_ms"] / row["batched_evaluation_ms"],
               study_ratio=row["one_study_s"] / row["batched_study_s"],
               bound=row["one_study_s"] / least)


def compiled_step(batch: int, trials: int = 24, steps: int = 200) -> dict[str, float]:
    """ms per trial-step of the least stacked step, eager and with ``torch.compile``."""
    import torch
    import torch.nn.functional as F

    pairs = list(itertools.pairwise(WIDTHS))
    weights = [(torch.randn(trials, i, o) * 0.1).requires_grad_() for i, o in pairs]
    biases = [torch.zeros(trials, 1, o, requires_grad=True) for _, o in pairs]
    params = weights + biases
    x = torch.randn(trials, batch, WIDTHS[0])
    y = torch.randint(0, WIDTHS[-1], (trials * batch,))

    def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = x
        for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
            h = torch.baddbmm(b, h, w)
            if i < len(weights) - 1:
                h = torch.relu(h)
        return F.cross_entropy(h.reshape(-1, WIDTHS[-1]), y)

    out: dict[str, float] = {}
    for name, forward in (("eager", loss_of), ("compiled", torch.compile(loss_of))):
        def step(forward: Callable[..., torch.Tensor] = forward) -> None:
            grads = torch.autograd.grad(forward(x, y), params)
            with torch.no_grad():
                torch._foreach_add_(params, list(grads), alpha=-0.01)

        out[f"{name}_first_two_s"] = _seconds(lambda step=step: (step(), step()))
        took = _seconds(lambda step=step: [step() for _ in range(steps)])
        out[f"{name}_ms"] = 1e3 * took / steps / trials
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="2,4,8,16,32,64,128,256,512,1024,1197")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--compile", action="store_true",
                        help="time torch.compile on the least stacked step instead")
    args = parser.parse_args()

    import torch

    from curvekit.runner.demo import DEMO_SWEEP

    torch.set_num_threads(1)
    if args.compile:
        rows = []
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            row = {"batch_size": batch, **compiled_step(batch)}
            rows.append(row)
            print(f"batch size {batch}: eager {row['eager_ms']:.3f} ms per trial-step, "
                  f"compiled {row['compiled_ms']:.3f} (compiling: "
                  f"{row['compiled_first_two_s']:.1f} s)", flush=True)
        print(f"results in {save('batched-compile', {'torch': torch.__version__, 'rows': rows})}")
        return
    peak = peak_gflops()
    train_flops, eval_flops = flops_per_example()
    print(f"best matrix-product rate here: {peak:.1f} GFLOP/s (one thread); "
          f"{train_flops:,} FLOP per training example, {eval_flops:,} per evaluated one")
    print(f"{'batch':>6} {'step: batched':>14} {'one':>7} {'ratio':>6} "
          f"{'eval: batched':>14} {'one':>6} {'ratio':>6} "
          f"{'study ratio':>12} {'bound':>6}")
    rows = []
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        row = measure(batch, args.repeat)
        study_model(row, DEMO_SWEEP["steps"][batch], peak)
        rows.append(row)
        print(f"{batch:>6} {row['batched_step_ms']:>14.3f} {row['one_step_ms']:>7.3f} "
              f"{row['step_ratio']:>5.1f}x {row['batched_evaluation_ms']:>14.2f} "
              f"{row['one_evaluation_ms']:>6.2f} {row['evaluation_ratio']:>5.1f}x "
              f"{row['study_ratio']:>11.1f}x {row['bound']:>5.1f}x", flush=True)
    out = save("batched-floor", {"load_average": os.getloadavg(), "torch": torch.__version__,
                                 "peak_gflops": peak, "flops_per_example":
                                 {"training": train_flops, "evaluation": eval_flops},
                                 "rows": rows})
    print(f"results in {out}")


if __name__ == "__main__":
    main()
