"""The batched trainer on a GPU: a study of 100 simple-CNN trials, batched against one by one.

The measurement: one study of ``--trials`` trials (default 100) of ``simple_cnn_base`` with
Nesterov momentum on an MNIST-sized tensor data set (55,000 train, 5,000 validation, 10,000
test images of 1×28×28, 10 classes), at each of ``--batch-sizes`` (default 32 and 1024),
each trial cut to the first ``--steps`` steps of the protocol with an evaluation of every
split every ``--eval-every`` steps. Batched: all trials of the study trained together
(:func:`curvekit.runner.batched.train_trials`). One by one: the first ``--one-by-one``
trials (default 10) trained after each other (:func:`curvekit.runner.train.run_trial`), the
reference path; its trials per minute are per trial, so the ratio does not depend on how
many trials it times. The GPU's utilisation is sampled every 50 ms while each side runs
(NVML through ``torch.cuda.utilization``, when the driver offers it).

The data set is generated (no download, no torchvision): every class is a fixed random
28×28 template, and an image is its class's template plus Gaussian noise, so the network
learns and the measured steps are real training steps, not a constant loss. Its name as
the runner sees it is ``benchmarks.gpu_study:mnist_sized``.

Usage::

    python benchmarks/gpu_study.py                     # on the GPU (the measurement)
    python benchmarks/gpu_study.py --device cpu --trials 4 --one-by-one 2 --steps 20 \
        --eval-every 10 --batch-sizes 32 --train-size 2000   # a quick check of the script

Results in ``benchmarks/results/gpu-study.json`` (``--label`` to change the name).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import save

_SIZES = {"train": 55_000, "val": 5_000, "test": 10_000}


def mnist_sized() -> dict[str, Any]:
    """An MNIST-sized classification data set: class templates plus noise (seeded)."""
    import torch

    scale = float(os.environ.get("CURVEKIT_GPU_STUDY_SCALE", "1"))
    gen = torch.Generator().manual_seed(0)
    templates = torch.rand(10, 1, 28, 28, generator=gen)
    out = {}
    for split, size in _SIZES.items():
        n = max(10, int(size * scale))
        y = torch.randint(0, 10, (n,), generator=gen)
        x = templates[y] + 0.8 * torch.randn(n, 1, 28, 28, generator=gen)
        out[split] = (x, y)
    return out


class Utilisation:
    """Samples the GPU's utilisation (percent) in a thread while a block runs."""

    def __init__(self, device: str) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._device = device
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import torch

        while not self._stop.wait(0.05):
            try:
                self.samples.append(int(torch.cuda.utilization(torch.device(self._device))))
            except Exception:  # no NVML: no samples, said in the results
                return

    def __enter__(self) -> Utilisation:
        if self._device.startswith("cuda"):
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def summary(self) -> dict[str, Any]:
        if not self.samples:
            return {"samples": 0}
        ordered = sorted(self.samples)
        return {"samples": len(ordered), "mean_pct": sum(ordered) / len(ordered),
                "median_pct": ordered[len(ordered) // 2]}


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def study(batch: int, args: argparse.Namespace) -> dict[str, Any]:
    """Time one study both ways; the row of the results table."""
    import torch

    from curvekit.runner.batched import train_trials, trials_that_fit
    from curvekit.runner.plan import Sweep
    from curvekit.runner.train import _data, run_trial

    sweep = Sweep.create("gpu_study", dataset="benchmarks.gpu_study:mnist_sized",
                         model="simple_cnn_base", optimizers=["nesterov_momentum"],
                         batch_sizes=[batch], trials=args.trials, steps=args.steps,
                         eval_every=args.eval_every, seed=0)
    specs = [replace(s, device=args.device) for s in sweep.trial_specs()]
    data = _data(specs[0], args.device)  # loaded once, as a worker holds it
    group = min(len(specs), trials_that_fit(specs[0], data, args.device))
    row: dict[str, Any] = {"batch_size": batch, "trials": len(specs), "steps": args.steps,
                           "eval_every": args.eval_every, "group": group}

    # Warm-up on both paths (CUDA context, cuDNN autotuning, allocator), not timed.
    warm = [replace(s, steps=min(2 * args.eval_every, s.steps)) for s in specs[:2]]
    train_trials(warm)
    run_trial(warm[0])
    _sync(args.device)

    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    with Utilisation(args.device) as use:
        start = time.perf_counter()
        batched = train_trials(specs)
        _sync(args.device)
        seconds = time.perf_counter() - start
    row["batched"] = {"seconds": seconds, "trials_per_min": 60 * len(specs) / seconds,
                      "infeasible": sum(r.status == "INFEASIBLE" for r in batched),
                      "utilisation": use.summary()}
    if args.device.startswith("cuda"):
        row["batched"]["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20

    ones = specs[:args.one_by_one]
    with Utilisation(args.device) as use:
        start = time.perf_counter()
        single = [run_trial(s) for s in ones]
        _sync(args.device)
        seconds = time.perf_counter() - start
    row["one_by_one"] = {"seconds": seconds, "trials_timed": len(ones),
                         "trials_per_min": 60 * len(ones) / seconds,
                         "infeasible": sum(r.status == "INFEASIBLE" for r in single),
                         "utilisation": use.summary()}
    row["ratio"] = row["batched"]["trials_per_min"] / row["one_by_one"]["trials_per_min"]
    # The same trials both ways: their final validation errors agree to rounding.
    pairs = [(a.columns, b.columns) for a, b in zip(batched, single, strict=False)]
    diffs = []
    for a, b in pairs:
        key = next((k for k in a if k.startswith("val/") and "error" in k), None)
        if key and a[key] and b[key] and a[key][-1] == a[key][-1]:
            diffs.append(abs(float(a[key][-1]) - float(b[key][-1])))
    row["max_final_val_error_difference"] = max(diffs) if diffs else None
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--one-by-one", type=int, default=10)
    parser.add_argument("--batch-sizes", default="32,1024")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--train-size", type=int, default=None,
                        help="scale the data set to this many training images")
    parser.add_argument("--label", default="gpu-study")
    args = parser.parse_args()
    if args.train_size:
        os.environ["CURVEKIT_GPU_STUDY_SCALE"] = str(args.train_size / _SIZES["train"])

    import torch

    rows = []
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        row = study(batch, args)
        rows.append(row)
        b, o = row["batched"], row["one_by_one"]
        print(f"batch {batch:5d}: batched {b['trials_per_min']:8.1f} trials/min "
              f"(GPU {b['utilisation'].get('mean_pct', '-')}%), one by one "
              f"{o['trials_per_min']:7.1f} (GPU {o['utilisation'].get('mean_pct', '-')}%): "
              f"{row['ratio']:.1f}x", flush=True)
    gpu = torch.cuda.get_device_name() if args.device.startswith("cuda") else None
    out = save(args.label, {"rows": rows, "device": args.device, "gpu": gpu,
                            "torch": torch.__version__, "python": platform.python_version(),
                            "cpu_count": os.cpu_count(), "machine": platform.machine()})
    print(f"results in {out}")
    print(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
