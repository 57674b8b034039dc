"""Coverage study: do the 95% intervals of S_min and B_crit contain the law's values?

Many generated workloads follow S(B) = S_min (1 + B_crit / B) exactly. Each study (one batch
size) runs N trials of a search over d metaparameters: a trial at distance u from the
study's optimal metaparameters (a point drawn anew for each batch size, as the optimal
learning rate moves with the batch size) needs S(B) · exp(α |u − u*|²) steps, and a trial
whose slowdown exceeds exp(α_fail) never reaches the goal. Steps to result is the best of
the N trials, so a finite N biases it upward; the truth is the law (what a fully tuned
search would find). Each workload is fitted with the intervals ``curvekit fit`` reports
(given, as ``fit`` reads it from the store, the count d of metaparameters searched), and
the share of intervals containing the truth is counted per quantity and setting, with
binomial standard errors, beside the trial bootstrap curvekit used before.

Usage::

    python benchmarks/coverage.py            # the full study: 11 settings x 300 workloads,
                                             # 400 simulations each (about 10 CPU minutes)
    python benchmarks/coverage.py --quick    # a smaller one
    python benchmarks/coverage.py --only 0 --only 1 ...   # a part (settings by number);
    python benchmarks/coverage.py --only 4 ... --merge     # parts side by side, then joined
    python benchmarks/coverage.py --only 0 --workloads 150 --samples 200 --baseline 0 \
        --label points                                  # a smaller study, saved apart

Beside coverage, each setting reports the error of the point ``fit`` reports (the
bias-corrected estimate where the estimator's requirements are met) and of the paper's
plain fit to the best trials, as the median of log(point / truth) (the bias, shown as a
ratio less 1) and the median of its absolute value.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curvekit.intervals import critical_intervals
from curvekit.scaling import bootstrap as trial_bootstrap
from curvekit.scaling import critical_point


@dataclass(frozen=True)
class Setting:
    """One family of generated workloads."""

    name: str
    batch_sizes: int
    trials: int
    dims: int = 2
    first: int = 16
    b_crit_octaves: tuple[float, float] = (1.5, 1.5)
    """B_crit is drawn log-uniformly this many octaves inside the grid's ends."""
    quantize: int = 0
    """Evaluations per S_min (0: steps to result is exact)."""
    counts: tuple[int, ...] = ()
    """Trials kept per batch size, in order (an adaptive run's unequal studies); () keeps
    ``trials`` everywhere."""


SETTINGS = (
    Setting("release-like: 10 batch sizes, 50 trials", 10, 50),
    Setting("few trials: 10 batch sizes, 10 trials", 10, 10),
    Setting("very few trials: 8 batch sizes, 5 trials", 8, 5),
    Setting("few batch sizes: 5 batch sizes, 30 trials", 5, 30),
    Setting("4 metaparameters searched: 10 batch sizes, 30 trials", 10, 30, dims=4),
    Setting("1 metaparameter searched: 10 batch sizes, 30 trials", 10, 30, dims=1),
    Setting("B_crit near the grid's ends: 8 batch sizes, 30 trials", 8, 30,
            b_crit_octaves=(-1.0, -1.0)),
    Setting("evaluations every S_min/20 steps: 10 batch sizes, 30 trials", 10, 30,
            quantize=20),
    Setting("B_crit anywhere in a short grid: 5 batch sizes, 30 trials", 5, 30,
            b_crit_octaves=(0.5, 0.5)),
    Setting("unequal trials: 10 batch sizes, 3 to 24 trials", 10, 24,
            counts=(24, 20, 12, 8, 3, 3, 3, 20, 24, 24)),
    Setting("thin studies: 10 batch sizes, 40 trials, 1 or 2 at three of them", 10, 40,
            counts=(40, 40, 2, 40, 40, 1, 40, 40, 2, 40)),
)


@dataclass(frozen=True)
class Workload:
    """A generated workload: the truth and each study's trials."""

    s_min: float
    b_crit: float
    hits: dict[int, np.ndarray]


def generate(setting: Setting, rng: np.random.Generator) -> Workload:
    """One workload of ``setting``: best-of-N steps around the law.

    >>> w = generate(SETTINGS[0], np.random.default_rng(0))
    >>> len(w.hits), all(len(h) == 50 for h in w.hits.values())
    (10, True)
    """
    first = setting.first * 2 ** int(rng.integers(0, 4))
    sizes = first * 2.0 ** np.arange(setting.batch_sizes)
    lo = math.log2(sizes[0]) + setting.b_crit_octaves[0]
    hi = math.log2(sizes[-1]) - setting.b_crit_octaves[1]
    b_crit = 2.0 ** rng.uniform(lo, hi)
    s_min = 10 ** rng.uniform(2.5, 4.5)
    alpha = math.exp(rng.uniform(math.log(1.0), math.log(6.0)))
    fail = alpha * rng.uniform(0.3, 0.9) * setting.dims
    law = s_min * (1 + b_crit / sizes)
    hits: dict[int, np.ndarray] = {}
    for b, s in zip(sizes, law, strict=True):
        u = rng.uniform(-1, 1, (setting.trials, setting.dims))
        best = rng.uniform(-0.5, 0.5, setting.dims)
        excess = alpha * ((u - best) ** 2).sum(axis=1)
        steps = s * np.exp(excess)
        if setting.quantize:
            every = s_min / setting.quantize
            steps = np.ceil(steps / every) * every
        hits[int(b)] = np.where(excess > fail, np.inf, steps)
    if setting.counts:
        hits = {b: h[:n] for (b, h), n in zip(hits.items(), setting.counts, strict=True)}
    return Workload(s_min, b_crit, hits)


def _covered(interval: tuple[float, float] | None, truth: float) -> bool | None:
    if interval is None:
        return None
    return interval[0] <= truth <= interval[1]


def study(settings: tuple[Setting, ...], workloads: int, samples: int, baseline: int,
          seed: int = 0) -> list[dict[str, object]]:
    """Coverage per setting of the calibrated method and (on ``baseline`` workloads) of
    the trial bootstrap with percentile intervals. Each row records when it ended and the
    machine's load averages (1, 5, 15 minutes) then."""
    rows: list[dict[str, object]] = []
    for setting in settings:
        # Seeded by the setting's place in SETTINGS: a part of the study equals the whole's.
        rng = np.random.default_rng([seed, SETTINGS.index(setting)])
        hit: dict[str, list[bool]] = {"s_min": [], "b_crit": []}
        old: dict[str, list[bool]] = {"s_min": [], "b_crit": []}
        declined: dict[str, int] = {}
        widths: list[float] = []
        # log(point / truth) of the point fit reports and of the plain fit to the best trials
        errors: dict[str, list[float]] = {f"{q}_{kind}": [] for q in ("s_min", "b_crit")
                                          for kind in ("point", "plain")}
        start = time.perf_counter()
        for i in range(workloads):
            w = generate(setting, rng)
            try:
                # the count of metaparameters searched is observable: the store holds every
                # trial's metaparameters (curvekit.measure.searched_metaparameters)
                result = critical_intervals(w.hits, samples=samples, seed=i,
                                            searched=setting.dims)
            except Exception as exc:  # a fit that fails counts as declined
                declined[type(exc).__name__] = declined.get(type(exc).__name__, 0) + 1
                continue
            for name, truth in (("s_min", w.s_min), ("b_crit", w.b_crit)):
                if name in result.reasons:
                    # the reason's kind, without the workload's own numbers
                    kind = re.sub(r"[0-9][0-9,.]*", "N", result.reasons[name].split(":")[0])
                    why = f"{name}: {kind[:60]}"
                    declined[why] = declined.get(why, 0) + 1
                else:
                    hit[name].append(bool(_covered(result.intervals[name], truth)))
            if "b_crit" in result.intervals:
                low, high = result.intervals["b_crit"]
                widths.append(high / low)
            best = {b: float(np.min(h)) for b, h in w.hits.items() if np.isfinite(h).any()}
            sizes = sorted(best)
            point = critical_point(w.hits, sizes, [best[b] for b in sizes])
            for name, truth in (("s_min", w.s_min), ("b_crit", w.b_crit)):
                errors[f"{name}_point"].append(math.log(getattr(point, name) / truth))
                errors[f"{name}_plain"].append(math.log(getattr(point.plain_fit, name) / truth))
            if i < baseline:
                boot = trial_bootstrap(w.hits, n=200, seed=i, model="perfect")
                for name, truth in (("s_min", w.s_min), ("b_crit", w.b_crit)):
                    if name in boot.intervals:
                        old[name].append(bool(_covered(boot.intervals[name], truth)))
        row: dict[str, object] = {**asdict(setting), "workloads": workloads,
                                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                  "load_average": [round(x, 1) for x in os.getloadavg()],
                                  "samples": samples, "seconds": time.perf_counter() - start,
                                  "declined": declined,
                                  "median_width_ratio": float(np.median(widths)) if widths
                                  else None}
        for key, values in errors.items():  # as ratios: exp(median log error) − 1
            logs = np.asarray(values)
            row[f"{key}_median_error"] = float(np.expm1(np.median(logs))) if len(logs) else None
            row[f"{key}_median_abs_error"] = (float(np.expm1(np.median(np.abs(logs))))
                                              if len(logs) else None)
        for name in ("s_min", "b_crit"):
            for label, values in (("", hit[name]), ("trial_bootstrap_", old[name])):
                m = len(values)
                p = sum(values) / m if m else math.nan
                row[f"{label}{name}_coverage"] = p
                row[f"{label}{name}_se"] = math.sqrt(p * (1 - p) / m) if m else math.nan
                row[f"{label}{name}_intervals"] = m
        rows.append(row)
        print(f"{setting.name:62s} B_crit {row['b_crit_coverage']:.3f} ± "
              f"{row['b_crit_se']:.3f}  S_min {row['s_min_coverage']:.3f} ± "
              f"{row['s_min_se']:.3f}  ({row['b_crit_intervals']} intervals, declined "
              f"{sum(v for k, v in declined.items() if k.startswith('b_crit'))}, S_min "
              f"{row['s_min_intervals']}); trial bootstrap B_crit "
              f"{row['trial_bootstrap_b_crit_coverage']:.3f} S_min "
              f"{row['trial_bootstrap_s_min_coverage']:.3f}  [{row['seconds']:.0f} s]",
              flush=True)
        print("    point's median error (median |error|), reported / plain fit: " + "; ".join(
            f"{name} {row[f'{name}_point_median_error']:+.3f} "
            f"({row[f'{name}_point_median_abs_error']:.3f}) / "
            f"{row[f'{name}_plain_median_error']:+.3f} "
            f"({row[f'{name}_plain_median_abs_error']:.3f})" for name in ("b_crit", "s_min")),
            flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workloads", type=int)
    parser.add_argument("--only", type=int, action="append")
    parser.add_argument("--baseline", type=int)
    parser.add_argument("--merge", action="store_true",
                        help="after this part, join every part into results/coverage.json")
    parser.add_argument("--merge-only", action="store_true", help="only join the parts")
    parser.add_argument("--samples", type=int, help="simulations per interval")
    parser.add_argument("--label", help="save the results as results/coverage-LABEL.json")
    args = parser.parse_args()
    if args.merge_only:
        merge()
        return
    workloads = args.workloads or (100 if args.quick else 300)
    chosen = tuple(SETTINGS[i] for i in args.only) if args.only else SETTINGS
    rows = study(chosen, workloads, samples=args.samples or (200 if args.quick else 400),
                 baseline=args.baseline if args.baseline is not None else (
                     5 if args.quick else 10))
    if args.label:
        from benchmarks.common import save

        print(f"results in {save('coverage-' + args.label, {'settings': rows})}")
    elif not args.quick:
        from benchmarks.common import save

        parts = "" if not args.only else "-part-" + "-".join(map(str, args.only))
        print(f"results in {save('coverage' + parts, {'settings': rows})}")
    if args.merge:
        merge()


def merge() -> None:
    """Join the parts (``--only``) run side by side into ``results/coverage.json``."""
    import json

    from benchmarks.common import save

    results = Path(__file__).parent / "results"
    latest: dict[str, dict[str, object]] = {}  # a setting rerun alone replaces its row
    for part in sorted(results.glob("coverage-part-*.json"), key=lambda p: p.stat().st_mtime):
        latest.update({str(row["name"]): row for row in json.loads(part.read_text())["settings"]})
    order = [s.name for s in SETTINGS]
    rows = sorted(latest.values(), key=lambda row: order.index(str(row["name"])))
    print(f"results in {save('coverage', {'settings': rows})}")


if __name__ == "__main__":
    main()
