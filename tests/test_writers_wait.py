"""A second writer of a home fails at once, or with --wait waits for the first to finish.

Every change of a store takes the home's lock in one place
(:func:`curvekit.store.transaction.lock_home`); how long it waits for another writer is set
around it by :func:`curvekit.store.transaction.wait_for_writers`, which each writing
command's ``--wait SECONDS`` opens. The tests hold the lock themselves and release it on an
event the waiting writer gives (its notice), never after a sleep.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import curvekit
from curvekit.cli import main
from curvekit.errors import StoreError
from curvekit.store.store import Store
from curvekit.store.transaction import lock_home, wait_for_writers
from curvekit.store.update import add_workload
from tests.conftest import snapshot
from tests.patience import PATIENCE
from tests.test_update import workload

WRITERS = ["add", "demo", "fetch", "run"]
"""The commands that change a store, each through the one lock."""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    add_workload(home, workload("first/net/sgd"))
    return home


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}


@pytest.mark.parametrize("command", WRITERS)
def test_every_writing_command_has_the_same_wait_option(command: str) -> None:
    """docs/security.md, Concurrency: every writing command takes --wait SECONDS."""
    option = next(p for p in main.commands[command].params if p.name == "wait")
    assert option.default == 0 and "--wait" in option.opts  # type: ignore[attr-defined]
    assert "wait up to SECONDS" in (option.help or "")


def test_a_second_writer_is_refused_at_once_naming_the_wait_option(home: Path) -> None:
    """docs/security.md, Concurrency: without --wait a second writer is refused at once, and
    the message says how to wait instead; the store is unchanged."""
    before = snapshot(home)
    with lock_home(home):
        result = CliRunner().invoke(main, ["demo", "--home", str(home)])
        with pytest.raises(StoreError, match="--wait SECONDS"):
            add_workload(home, workload("second/net/sgd"))
    assert result.exit_code == 1
    assert result.stderr == (f"Error: another curvekit process is writing to {home}; wait for "
                             "it to finish and run this again, or give the command --wait "
                             "SECONDS to wait for it\n")
    assert snapshot(home) == before


def test_a_waiting_command_goes_on_once_the_writer_has_finished(home: Path) -> None:
    """docs/security.md, Concurrency: `curvekit demo --wait` says on stderr that it waits,
    and adds its workloads once the lock is free."""
    with lock_home(home):
        proc = subprocess.Popen([sys.executable, "-m", "curvekit", "demo", "--home", str(home),
                                 "--wait", str(PATIENCE)], env=_env(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        notice = proc.stderr.readline()  # the command is waiting: release the lock now
        assert notice == (f"Note: another curvekit process is writing to {home}; waiting up "
                          f"to {PATIENCE:g} s for it to finish.\n")
        assert proc.poll() is None
        assert "demo/digits/fc_128_128_128/sgd" not in Store.open(home).workloads()
    out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 0, err
    assert out.startswith("Added demo/digits/")
    assert "demo/digits/fc_128_128_128/sgd" in Store.open(home).workloads()


def test_a_waiting_library_call_goes_on_once_the_writer_has_finished(home: Path) -> None:
    """In Python, wait_for_writers does what --wait does: the call waits (its notice says
    so) while the lock is held, changes nothing meanwhile, and adds once it is released."""
    waiting = threading.Event()
    outcome: list[object] = []

    def second_writer() -> None:
        try:
            with wait_for_writers(math.inf, notice=lambda message: waiting.set()):
                outcome.append(add_workload(home, workload("second/net/sgd")))
        except BaseException as exc:  # reported by the test below, not lost in the thread
            outcome.append(exc)

    writer = threading.Thread(target=second_writer)
    with lock_home(home):
        writer.start()
        assert waiting.wait(PATIENCE), "the second writer never said it was waiting"
        before = snapshot(home)
        assert outcome == []  # it cannot get past the lock this test holds
    writer.join(PATIENCE)
    assert not writer.is_alive()
    [result] = outcome
    assert isinstance(result, curvekit.AddResult) and result.changed, result
    assert snapshot(home) != before
    assert set(Store.open(home).workloads()) == {"first/net/sgd", "second/net/sgd"}


def test_a_wait_that_runs_out_is_an_error_and_changes_nothing(home: Path) -> None:
    """docs/security.md, Concurrency: a writer still there when --wait runs out is an
    error naming the time waited; the store is unchanged."""
    before = snapshot(home)
    with lock_home(home):  # held for the whole call: the wait can only run out
        result = CliRunner().invoke(main, ["demo", "--home", str(home), "--wait", "0.2"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"Note: another curvekit process is writing to {home}; waiting up to 0.2 s for it to "
        "finish.",
        f"Error: another curvekit process is still writing to {home} after waiting 0.2 s; the "
        "store is unchanged. Wait for it to finish and run this again, or give --wait a "
        "longer time"]
    assert snapshot(home) == before


def test_a_free_lock_is_taken_without_a_word(home: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--home", str(home), "--wait", "30"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_the_wait_ends_with_its_block(home: Path) -> None:
    """After a wait_for_writers block, a writer fails at once again."""
    with wait_for_writers(math.inf):
        pass
    with lock_home(home), pytest.raises(StoreError, match="--wait SECONDS"):
        add_workload(home, workload("second/net/sgd"))


@given(seconds=st.one_of(st.floats(max_value=-1e-300), st.just(math.nan),
                         st.integers(max_value=-1), st.text(max_size=5), st.none()))
def test_a_wait_that_is_not_a_time_is_refused(seconds: object) -> None:
    with pytest.raises(StoreError, match="expected a number of seconds, 0 or more"), \
            wait_for_writers(seconds):  # type: ignore[arg-type]
        pass


@given(seconds=st.one_of(st.floats(max_value=-1e-300), st.just(math.nan)))
def test_the_command_line_refuses_a_wait_that_is_not_a_time(seconds: float) -> None:
    result = CliRunner().invoke(main, ["demo", "--home", "/nonexistent", "--wait", str(seconds)])
    assert result.exit_code == 2 and "--wait" in result.stderr
