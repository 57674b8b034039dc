"""The suite's settings for collecting the package's doctests (``--doctest-modules``;
pytest's testpaths include ``curvekit/``). It lives beside the package, not in it, so an
installed curvekit holds no test configuration.

Collecting a module's doctests imports it, and the runner's training modules import torch
at the top. The ``dev`` extra installs torch, but without it the suite should still collect
and run everything else, so those modules are left out of collection; their tests skip
on their own (tests/test_run_*.py).
"""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("torch") is None:
    collect_ignore += ["curvekit/runner/train.py", "curvekit/runner/workloads.py",
                       "curvekit/runner/batched.py"]
