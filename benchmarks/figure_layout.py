"""Benchmark: the cost of the figures' layout rules (padded axes, legends placed where they
cover the least data, broken lines and their notes, one colour per series), side by side
with the code before them in the same run.

``curvekit figure 8`` (PNG) and ``curvekit figure 17`` (JSON: the spec alone, where the
rules' own cost shows) run as whole commands in fresh processes, five times each,
interleaved with the same commands run on the baseline's package (a copy of ``curvekit/``
and ``data_manifest/`` at the commit given). Each version is put first on ``PYTHONPATH`` and
run from a folder outside the checkout, so that neither picks up the other.

Usage::

    python benchmarks/figure_layout.py HOME BASELINE_COMMIT
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, save, timed

ROOT = Path(__file__).resolve().parent.parent


def main(home: str, baseline: str) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix="ck-layout-", dir=WORK))
    base = out / "baseline"
    base.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", baseline, "curvekit",
                              "data_manifest"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    cli = [sys.executable, "-m", "curvekit"]
    runs: dict[str, list[float]] = {}
    for _ in range(5):  # interleaved, so that load on the machine hits both alike
        for version, env in (("after", {"PYTHONPATH": str(ROOT)}),
                             ("before", {"PYTHONPATH": str(base)})):
            for number, fmt in ((8, "png"), (17, "json")):
                run = timed(f"{version} figure {number}",
                            [*cli, "figure", str(number), "--home", home, "--format", fmt,
                             "--out", str(out / f"{version}-{number}.{fmt}")], env=env,
                            cwd=out)
                assert run.returncode == 0, run
                runs.setdefault(f"{version} figure {number} {fmt}", []).append(run.seconds)
    result = {label: {"median": statistics.median(s), "min": min(s), "max": max(s), "runs": s}
              for label, s in runs.items()}
    for number, fmt in ((8, "png"), (17, "json")):
        after = result[f"after figure {number} {fmt}"]["median"]
        before = result[f"before figure {number} {fmt}"]["median"]
        result[f"ratio figure {number} {fmt}"] = {"after_over_before": after / before}
        print(f"figure {number} ({fmt}): before {before:.2f} s, after {after:.2f} s, "
              f"ratio {after / before:.2f}")
    save("figure-layout", {"home": home, "baseline": baseline, **result})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
