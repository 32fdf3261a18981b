"""Every retry in dnnframe: named policies (how many attempts, what back-off, which errors),
declared once here and run by tenacity.

A policy retries only the errors it names; anything else ends the call at once. When the
last attempt fails, its error is raised as it is (never swallowed, never wrapped in
tenacity's RetryError), so the caller turns it into the error it owes its own caller.
Each retry is logged (at the policy's ``log_level``) with what failed and when the next
attempt comes.

Errors are named by their module path, so this module imports no database or broker
driver (pymongo is optional): an error of a module that was never imported cannot occur.

Celery's own retries (a task's ``autoretry``, kombu's publish ``retry_policy``) are
configured where Celery takes them; these are the loops dnnframe runs itself.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import tenacity

log = logging.getLogger(__name__)

T = TypeVar("T")


class AttemptAgain(Exception):  # noqa: N818 - a request, like tenacity's TryAgain
    """Raised inside an attempt: make the next attempt (any policy), as for a named error.
    Raised as it is when it was the last attempt."""


def pause(seconds: float) -> None:
    """The wait between two attempts of every policy (one place for tests to shorten)."""
    time.sleep(seconds)


def _exception_class(path: str) -> type[BaseException] | None:
    module, _, name = path.rpartition(".")
    return getattr(sys.modules.get(module), name, None)


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; before try n+1, wait ``first_wait_s * 2**(n-1)``, at most
    ``max_wait_s``. Retries the errors ``retry_on`` names (``"module.Class"``, subclasses
    included) for which ``when`` (if given) is true, and :class:`AttemptAgain`. Retries
    are logged at ``log_level``: INFO where the caller reports the last failure anyway (a
    command's one-line error stays one line), WARNING where a retry is news by itself."""

    name: str
    attempts: int
    first_wait_s: float
    max_wait_s: float
    retry_on: tuple[str, ...]
    when: Callable[[BaseException], bool] | None = field(default=None, compare=False)
    log_level: int = logging.INFO

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.first_wait_s < 0 or self.max_wait_s < self.first_wait_s:
            raise ValueError(
                f"retry policy {self.name!r}: needs attempts >= 1 and "
                f"0 <= first_wait_s <= max_wait_s, but got {self}"
            )
        bad = [p for p in self.retry_on if "." not in p.strip(".")]
        if bad:
            raise ValueError(
                f"retry policy {self.name!r}: errors are named 'module.Class', but got {bad}"
            )

    def retries(self, exc: BaseException) -> bool:
        """Whether this policy retries ``exc``."""
        if isinstance(exc, AttemptAgain):
            return True
        classes = tuple(c for c in map(_exception_class, self.retry_on) if c is not None)
        return isinstance(exc, classes) and (self.when is None or self.when(exc))

    def waits(self) -> list[float]:
        """The waits between attempts, in seconds (``attempts - 1`` of them)."""
        return [min(self.first_wait_s * 2**n, self.max_wait_s) for n in range(self.attempts - 1)]

    def retrying(
        self, what: str, sleep: Callable[[float], None] | None = None
    ) -> tenacity.Retrying:
        """A tenacity ``Retrying`` for this policy; ``what`` names the work in the log,
        ``sleep`` waits (default :func:`pause`). Iterate it (``for attempt in ...: with
        attempt: ...``) or call it with a function."""

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            wait = state.next_action.sleep if state.next_action else 0.0
            log.log(
                self.log_level,
                "%s failed (%s: %s); attempt %d of %d, the next in %.1fs [%s]",
                what,
                type(exc).__name__,
                " ".join(str(exc).split())[:200],
                state.attempt_number,
                self.attempts,
                wait,
                self.name,
            )

        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=tenacity.wait_exponential(
                multiplier=self.first_wait_s, exp_base=2, max=self.max_wait_s
            ),
            retry=tenacity.retry_if_exception(self.retries),
            reraise=True,
            sleep=sleep or (lambda s: pause(s)),
            before_sleep=before_sleep,
        )

    def call(
        self,
        fn: Callable[..., T],
        *args: Any,
        what: str,
        sleep: Callable[[float], None] | None = None,
        **kwargs: Any,
    ) -> T:
        """``fn(*args, **kwargs)``, retried by this policy; the last failure is raised."""
        return self.retrying(what, sleep)(fn, *args, **kwargs)


def _sqlite_busy(exc: BaseException) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


# A database server restarting or failing over (PostgreSQL refusing connections, a lost
# connection or an ended session; a MongoDB primary stepping down): ~6 s of back-off
# between 6 attempts. Every store write is safe to retry (store/base.py).
STORE_WRITE = RetryPolicy(
    "store_write",
    attempts=6,
    first_wait_s=0.2,
    max_wait_s=3.0,
    retry_on=(
        "psycopg.OperationalError",
        "psycopg.errors.IdleInTransactionSessionTimeout",
        "pymongo.errors.AutoReconnect",
    ),
)

# A SQLite file held by other writers: each attempt already waits out the busy timeout
# (store/sqlite_file.py), so 8 attempts are minutes of waiting.
SQLITE_BUSY = RetryPolicy(
    "sqlite_busy",
    attempts=8,
    first_wait_s=0.05,
    max_wait_s=3.2,
    retry_on=("sqlite3.OperationalError",),
    when=_sqlite_busy,
)

# A trial's final state and last epochs: the store already retried its own hiccups; these
# tries cover a longer outage before the pack gives up (Sacred's lesson: a results
# database hiccup must not kill a run).
FINAL_WRITE = RetryPolicy(
    "final_write",
    attempts=5,
    first_wait_s=0.2,
    max_wait_s=1.6,
    retry_on=("dnnframe.exceptions.StoreError",),
    log_level=logging.WARNING,
)

# Publishing a batch of packs in one broker transaction: any failure (refused, dropped,
# channel closed) redoes the whole batch on a new connection; then the trials are held in
# the store for a later send.
BROKER_PUBLISH = RetryPolicy(
    "broker_publish", attempts=3, first_wait_s=0.2, max_wait_s=0.4, retry_on=("builtins.Exception",)
)

POLICIES = (STORE_WRITE, SQLITE_BUSY, FINAL_WRITE, BROKER_PUBLISH)
