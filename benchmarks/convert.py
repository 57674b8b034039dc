"""Benchmark: converting the release archive into the store.

Side by side in one run, on the same generated archive:

* ``bzip2 -dc > /dev/null`` — plain single-threaded decompression (the baseline);
* ``lbzip2 -dc > /dev/null`` — parallel decompression alone, for reference (if installed);
* ``curvekit fetch --archive`` — the whole conversion (sha256, decompress, parse, write),
  with the peak memory of its process tree;

plus the store's size next to the archive's. Then, on a smaller archive, the way users do it
without curvekit (extract with tar, then pandas ``read_csv`` per trial and concatenate)
next to curvekit on the same archive.

Usage::

    python benchmarks/convert.py                      # full scale (~70M rows)
    python benchmarks/convert.py --trial-fraction 0.1 # a quicker look
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, archive, du, save, timed

USERS_TODAY = r"""
import glob, json, os, sys, tarfile
import pandas as pd
archive, out = sys.argv[1], sys.argv[2]
with tarfile.open(archive, "r:bz2") as tar:
    tar.extractall(out, filter="data")
frames = []
for path in glob.glob(os.path.join(out, "**", "measurements.csv"), recursive=True):
    trial_dir = os.path.dirname(path)
    with open(os.path.join(trial_dir, "metadata.json")) as fh:
        meta = json.load(fh)
    frame = pd.read_csv(path)
    frame["trial_id"] = meta["trial_id"]
    frame["status"] = meta["status"]
    frame["study"] = os.path.dirname(trial_dir)
    frames.append(frame)
table = pd.concat(frames, ignore_index=True)
print(len(table))
"""


def convert_runs(path: Path, manifest: Path, decompressors: list[str]) -> dict[str, object]:
    home = Path(tempfile.mkdtemp(prefix="ck-bench-", dir=WORK))
    runs = [timed("bzip2 -dc", f"bzip2 -dc '{path}' > /dev/null", shell=True)]
    if shutil.which("lbzip2"):
        runs.append(timed("lbzip2 -dc", f"lbzip2 -dc '{path}' > /dev/null", shell=True))
    for dec in decompressors:
        runs.append(timed(f"curvekit fetch ({dec})", [
            sys.executable, "-m", "curvekit", "fetch", "--archive", str(path),
            "--manifest", str(manifest), "--home", str(home), "--force", "--quiet",
            "--decompressor", dec]))
    store = du(home / "store")
    size = path.stat().st_size
    shutil.rmtree(home)
    base = runs[0].seconds
    return {"archive_bytes": size, "store_bytes": store, "store_over_archive": store / size,
            "runs": runs, "ratios_to_bzip2": {r.label: r.seconds / base for r in runs}}


def users_today(path: Path, manifest: Path) -> dict[str, object]:
    out = Path(tempfile.mkdtemp(prefix="ck-users-", dir=WORK))
    home = Path(tempfile.mkdtemp(prefix="ck-bench-", dir=WORK))
    theirs = timed("tar + pandas.read_csv per trial",
                   [sys.executable, "-c", USERS_TODAY, str(path), str(out / "x")])
    ours = timed("curvekit fetch", [sys.executable, "-m", "curvekit", "fetch", "--archive",
                                    str(path), "--manifest", str(manifest), "--home",
                                    str(home), "--force", "--quiet"])
    shutil.rmtree(out)
    shutil.rmtree(home)
    return {"runs": [theirs, ours], "speedup": theirs.seconds / ours.seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trial-fraction", type=float, default=1.0)
    parser.add_argument("--baseline-fraction", type=float, default=0.03)
    parser.add_argument("--decompressor", action="append",
                        help="auto, lbzip2, indexed_bzip2 or python (repeatable)")
    args = parser.parse_args()
    decompressors = args.decompressor or ["auto"]
    name = "full" if args.trial_fraction == 1 else f"f{args.trial_fraction:g}"
    path, manifest = archive(name, trial_fraction=args.trial_fraction, order="walk")
    result: dict[str, object] = {"archive": str(path), "conversion": convert_runs(
        path, manifest, decompressors)}
    small, small_manifest = archive(f"f{args.baseline_fraction:g}",
                                    trial_fraction=args.baseline_fraction, order="walk")
    result["users_today"] = users_today(small, small_manifest)
    out = save(f"convert-{name}", result)
    conv = result["conversion"]
    assert isinstance(conv, dict)
    for run in conv["runs"]:
        print(f"{run.label:32s} {run.seconds:8.1f} s  x{run.seconds / conv['runs'][0].seconds:5.2f}"
              f"  peak {run.peak_rss_mb:7.0f} MB")
    print(f"store {conv['store_bytes'] / 1e6:.0f} MB / archive {conv['archive_bytes'] / 1e6:.0f} MB"
          f" = {conv['store_over_archive']:.2f}")
    users = result["users_today"]
    assert isinstance(users, dict)
    for run in users["runs"]:
        print(f"{run.label:32s} {run.seconds:8.1f} s  peak {run.peak_rss_mb:7.0f} MB")
    print(f"curvekit is {users['speedup']:.1f}x faster than extract + pandas; results in {out}")


if __name__ == "__main__":
    main()
