"""The retry policies (dnnframe/retrying.py): what each retries, how long it waits, and that
its last failure reaches the caller as it is. Waits are recorded, not slept."""

from __future__ import annotations

import logging
import sqlite3

import psycopg
import pytest

from dnnframe.exceptions import StoreError
from dnnframe.retrying import (
    BROKER_PUBLISH,
    FINAL_WRITE,
    SQLITE_BUSY,
    STORE_WRITE,
    AttemptAgain,
    RetryPolicy,
)


class Failing:
    """Raises ``errors`` one per call, then answers "done"."""

    def __init__(self, *errors: BaseException):
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


@pytest.mark.parametrize(
    "policy, waits",
    [
        (STORE_WRITE, [0.2, 0.4, 0.8, 1.6, 3.0]),
        (SQLITE_BUSY, [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2]),
        (FINAL_WRITE, [0.2, 0.4, 0.8, 1.6]),
        (BROKER_PUBLISH, [0.2, 0.4]),
    ],
)
def test_a_named_error_is_retried_until_the_bound_then_raised_as_it_is(policy, waits, caplog):
    error = {
        STORE_WRITE: psycopg.OperationalError("server closed the connection"),
        SQLITE_BUSY: sqlite3.OperationalError("database is locked"),
        FINAL_WRITE: StoreError("the store went away"),
        BROKER_PUBLISH: ConnectionRefusedError(111, "Connection refused"),
    }[policy]
    fn, slept = Failing(*[error] * 20), []
    with (
        caplog.at_level(logging.INFO, logger="dnnframe.retrying"),
        pytest.raises(type(error)) as raised,
    ):
        policy.call(fn, what="the test's write", sleep=slept.append)
    assert raised.value is error  # not tenacity's RetryError, not swallowed
    assert fn.calls == len(waits) + 1 and slept == waits == policy.waits()
    logged = [r.levelno for r in caplog.records if "the test's write failed" in r.message]
    # a retry is news where no error would follow it to a person (a pack's final writes)
    assert logged == [logging.WARNING if policy is FINAL_WRITE else logging.INFO] * len(waits)


@pytest.mark.parametrize("policy", [STORE_WRITE, SQLITE_BUSY, FINAL_WRITE, BROKER_PUBLISH])
def test_a_recovery_within_the_bound_answers(policy):
    error = {
        STORE_WRITE: psycopg.errors.IdleInTransactionSessionTimeout("ended"),
        SQLITE_BUSY: sqlite3.OperationalError("database is busy"),
        FINAL_WRITE: StoreError("hiccup"),
        BROKER_PUBLISH: OSError("reset"),
    }[policy]
    fn, slept = Failing(error, AttemptAgain()), []
    assert policy.call(fn, what="w", sleep=slept.append) == "done"
    assert fn.calls == 3 and slept == policy.waits()[:2]


@pytest.mark.parametrize(
    "policy, error",
    [
        (STORE_WRITE, StoreError("a wrong URL")),
        (STORE_WRITE, psycopg.errors.UniqueViolation("duplicate key")),
        (SQLITE_BUSY, sqlite3.OperationalError("no such table: trials")),
        (SQLITE_BUSY, sqlite3.DatabaseError("file is not a database")),
        (FINAL_WRITE, ValueError("a bad argument")),
        (BROKER_PUBLISH, KeyboardInterrupt()),
    ],
)
def test_an_error_the_policy_does_not_name_ends_the_call_at_once(policy, error):
    fn, slept = Failing(error), []
    with pytest.raises(type(error)):
        policy.call(fn, what="w", sleep=slept.append)
    assert fn.calls == 1 and slept == []


def test_errors_of_a_module_never_imported_are_not_an_import():
    policy = RetryPolicy(
        "p",
        attempts=2,
        first_wait_s=0,
        max_wait_s=0,
        retry_on=("no_such_driver.errors.Gone", "builtins.LookupError"),
    )
    assert policy.retries(KeyError("k")) and not policy.retries(OSError("x"))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"attempts": 0}, "attempts >= 1"),
        ({"first_wait_s": 2.0}, "first_wait_s <= max_wait_s"),
        ({"retry_on": ("OSError",)}, "'module.Class'"),
    ],
)
def test_a_malformed_policy_is_refused(kwargs, message):
    args = {
        "name": "p",
        "attempts": 2,
        "first_wait_s": 0.1,
        "max_wait_s": 1.0,
        "retry_on": ("builtins.OSError",),
        **kwargs,
    }
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**args)


def test_a_locked_sqlite_file_is_waited_for(tmp_path):
    """A real lock held by another connection; it is released during the third wait."""
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, timeout=0, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            holder.execute("ROLLBACK")

    SQLITE_BUSY.call(waiter.execute, "BEGIN IMMEDIATE", what="begin", sleep=sleep)
    assert slept == [0.05, 0.1, 0.2]
    waiter.execute("ROLLBACK")
