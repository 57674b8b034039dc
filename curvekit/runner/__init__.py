"""The runner: the paper's measurement protocol on your own hardware.

Data flows search space (:mod:`~curvekit.runner.space`) → plan of studies × trials
(:mod:`~curvekit.runner.plan`) → training (:mod:`~curvekit.runner.train`, built-in
workloads in :mod:`~curvekit.runner.workloads`) on an executor
(:mod:`~curvekit.runner.executors`) → one Parquet part per finished trial
(:mod:`~curvekit.runner.parts`) → store records (:mod:`~curvekit.runner.collect`) →
:func:`curvekit.store.update.add_workload`. :func:`~curvekit.runner.sweep.run` drives it;
:mod:`~curvekit.runner.demo` ships a data set made this way.

Only training needs torch (``pip install -e ".[train]"``); planning and the demo do not.
"""
