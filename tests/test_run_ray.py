"""The Ray executor, against a local Ray instance: same trials, same curves as local runs."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")
ray = pytest.importorskip("ray")

import curvekit  # noqa: E402
from curvekit.errors import RunError  # noqa: E402

OPTIONS = dict(dataset="digits", model="fc_16", optimizers=["sgd"], batch_sizes=[32, 64],
               trials=2, steps=60, eval_every=20, device="cpu", seed=5)


@pytest.mark.slow
def test_ray_executor_matches_local_processes(tmp_path: Path) -> None:
    """A Ray started by the caller is used as it is (docs/security.md, "Processes curvekit
    starts"); its trials equal those of local processes."""
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = curvekit.run("ray", **OPTIONS, executor="ray", work_dir=tmp_path / "ray",
                              store=False)
        # An error inside a Ray task comes back as the runner's own error.
        with pytest.raises(RunError, match="larger than the 1197 training examples"):
            curvekit.run("ray", **{**OPTIONS, "batch_sizes": [5000], "trials": 1},
                         executor="ray", work_dir=tmp_path / "bad", store=False)
    finally:
        ray.shutdown()
    assert (on_ray.ran, on_ray.resumed) == (4, 0)
    local = curvekit.run("ray", **OPTIONS, work_dir=tmp_path / "local", store=False)
    assert local.ran == 4
    files = sorted(p.relative_to(tmp_path / "ray")
                   for p in (tmp_path / "ray").glob("parts/**/*.parquet"))
    assert len(files) == 4
    for name in files:
        assert pq.read_table(tmp_path / "ray" / name).equals(
            pq.read_table(tmp_path / "local" / name))
