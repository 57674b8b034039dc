"""The search-space sampler respects every type and scale of the release's format."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import RunError
from curvekit.runner.plan import Sweep, default_space
from curvekit.runner.space import SearchSpace


@st.composite
def parameter(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["DOUBLE", "INTEGER", "DISCRETE"]))
    if kind == "DISCRETE":
        points = draw(st.lists(st.one_of(st.integers(-50, 50),
                                         st.floats(-1e3, 1e3, allow_nan=False)),
                               min_size=1, max_size=6))
        return {"type": kind, "feasible_points": points,
                "scale": draw(st.sampled_from(["LINEAR_SCALE", "LOG_SCALE", ""]))}
    scale = draw(st.sampled_from(["LINEAR_SCALE", "LOG_SCALE", "REVERSE_LOG_SCALE", ""]
                                 if kind == "DOUBLE" else ["LINEAR_SCALE", "LOG_SCALE", ""]))
    if kind == "INTEGER":
        low = draw(st.integers(1 if scale == "LOG_SCALE" else -100, 1000))
        return {"type": kind, "min_value": low, "max_value": low + draw(st.integers(0, 5000)),
                "scale": scale}
    if scale == "LOG_SCALE":
        low = 10 ** draw(st.floats(-6, 3))
        high = low * 10 ** draw(st.floats(0, 6))
    elif scale == "REVERSE_LOG_SCALE":
        low = draw(st.floats(-1.0, 0.99))
        high = max(low, 1 - (1 - low) * 10 ** -draw(st.floats(0, 5)))
    else:
        low = draw(st.floats(-1e4, 1e4))
        high = low + draw(st.floats(0, 1e4))
    return {"type": kind, "min_value": low, "max_value": high, "scale": scale}


def _coordinate(config: dict[str, Any], value: float) -> float:
    """Where ``value`` lies on the parameter's scale, as the sampler maps it."""
    if config["scale"] == "LOG_SCALE":
        return math.log(value)
    if config["scale"] == "REVERSE_LOG_SCALE":
        return -math.log1p(-value)
    return value


@settings(max_examples=150, deadline=None)
@given(configs=st.dictionaries(st.sampled_from(["a", "b", "learning_rate", "momentum", "z"]),
                               parameter(), min_size=1, max_size=5),
       n=st.integers(1, 70), seed=st.integers(0, 2**32 - 1),
       method=st.sampled_from(["sobol", "halton"]))
def test_every_sample_respects_bounds_type_and_scale(configs: dict[str, Any], n: int,
                                                      seed: int, method: str) -> None:
    space = SearchSpace.from_configs(configs)
    points = space.sample(n, seed=seed, method=method)  # type: ignore[arg-type]
    assert len(points) == n
    for point in points:
        assert space.contains(point)
        for name, config in configs.items():
            value = point[name]
            if config["type"] == "DISCRETE":
                assert value in config["feasible_points"]
                assert type(value) in {type(p) for p in config["feasible_points"]}
            elif config["type"] == "INTEGER":
                assert type(value) is int
                assert config["min_value"] <= value <= config["max_value"]
            else:
                assert type(value) is float
                assert config["min_value"] <= value <= config["max_value"]
    # The first points do not depend on how many are drawn.
    assert space.sample(max(1, n // 2), seed=seed, method=method) == points[:max(1, n // 2)]


@settings(max_examples=80, deadline=None)
@given(config=parameter().filter(lambda c: c["type"] == "DOUBLE" and (
           _coordinate(c, c["max_value"]) - _coordinate(c, c["min_value"])
           > 1e-6 * max(1.0, abs(_coordinate(c, c["min_value"]))))),
       m=st.integers(1, 7), seed=st.integers(0, 2**32 - 1))
def test_sobol_points_are_uniform_on_the_scale(config: dict[str, Any], m: int,
                                               seed: int) -> None:
    # A scrambled Sobol draw of 2^m points puts exactly one point in each of the 2^m equal
    # slices of the unit interval, so exactly half fall below the midpoint of the scale.
    space = SearchSpace.from_configs({"x": config})
    values = [p["x"] for p in space.sample(2**m, seed=seed)]
    low, high = (_coordinate(config, config[k]) for k in ("min_value", "max_value"))
    for quarter in (1, 2, 3):
        cut = low + (high - low) * quarter / 4
        below = sum(_coordinate(config, v) < cut for v in values)
        if m >= 2:
            assert abs(below - 2**m * quarter / 4) <= 1
    assert min(values) >= config["min_value"] and max(values) <= config["max_value"]


def test_integers_get_equal_shares() -> None:
    space = SearchSpace.from_configs({"k": {"type": "INTEGER", "min_value": 3, "max_value": 6,
                                            "scale": "LINEAR_SCALE"}})
    values = [p["k"] for p in space.sample(64, seed=1)]
    assert {v: values.count(v) for v in range(3, 7)} == {3: 16, 4: 16, 5: 16, 6: 16}


def test_reverse_log_crowds_towards_one() -> None:
    space = SearchSpace.from_configs({"momentum": {
        "type": "DOUBLE", "min_value": 0.0, "max_value": 0.999, "scale": "REVERSE_LOG_SCALE"}})
    values = sorted(p["momentum"] for p in space.sample(64, seed=2))
    # 1 - momentum is log-uniform in [0.001, 1]: a third of the points above 0.99.
    assert sum(v > 0.99 for v in values) == pytest.approx(64 / 3, abs=1)
    assert sum(v < 0.9 for v in values) == pytest.approx(64 / 3, abs=1)


def test_space_round_trips_in_release_format() -> None:
    configs = default_space("nesterov_momentum", 1000)
    assert SearchSpace.from_configs(configs).to_configs() == configs
    assert configs["learning_rate_decay_steps"] == {
        "type": "INTEGER", "min_value": 500, "max_value": 1000, "scale": "LINEAR_SCALE"}


@pytest.mark.parametrize(("config", "message"), [
    ({"type": "FLOAT", "min_value": 0, "max_value": 1}, "type is 'FLOAT'"),
    ({"type": "DOUBLE", "min_value": 0, "max_value": 1, "scale": "LOG"}, "scale is 'LOG'"),
    ({"type": "DOUBLE", "min_value": 0, "max_value": 1, "scale": "LOG_SCALE"},
     "needs min_value > 0"),
    ({"type": "DOUBLE", "min_value": 0.5, "max_value": 1, "scale": "REVERSE_LOG_SCALE"},
     "needs max_value < 1"),
    ({"type": "DOUBLE", "min_value": 2, "max_value": 1}, "min_value 2.0 > max_value 1.0"),
    ({"type": "INTEGER", "min_value": 0.5, "max_value": 3}, "not whole numbers"),
    ({"type": "DISCRETE", "feasible_points": []}, "non-empty feasible_points"),
    ({"type": "DOUBLE", "min_value": "a", "max_value": 1}, "finite number"),
])
def test_bad_configs_are_named(config: dict[str, Any], message: str) -> None:
    with pytest.raises(RunError, match="search space: x") as info:
        SearchSpace.from_configs({"x": config})
    assert message in str(info.value)


def test_sweep_checks_the_space_against_the_optimizer() -> None:
    options: dict[str, Any] = dict(dataset="digits", model="fc_8", batch_sizes=[8], trials=1,
                                   steps=10, eval_every=5)
    momentum = default_space("momentum", 10)
    with pytest.raises(RunError, match="sgd has no momentum"):
        Sweep.create(None, optimizers=["sgd"], space=momentum, **options)
    with pytest.raises(RunError, match="needs a momentum range"):
        Sweep.create(None, optimizers=["momentum"], space=default_space("sgd", 10), **options)
    with pytest.raises(RunError, match=r"unknown metaparameters \['dropout'\]"):
        Sweep.create(None, optimizers=["sgd"], space={**default_space("sgd", 10), "dropout": {
            "type": "DOUBLE", "min_value": 0, "max_value": 1}}, **options)
    per_optimizer = Sweep.create(None, optimizers=["sgd", "momentum"], space={
        "sgd": default_space("sgd", 10), "momentum": momentum}, **options)
    assert "momentum" in per_optimizer.spaces["momentum"][8]
    assert "momentum" not in per_optimizer.spaces["sgd"][8]
