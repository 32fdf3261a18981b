"""``dnnframe drive``: the driver service (the search drivers of tpe/cmaes experiments)."""

from __future__ import annotations

import logging
import signal
import threading

import click

from .. import settings
from ..extras import require
from ..search.child import DRIVE
from ..search.child import supervise as supervise_child
from ..urls import redact
from .common import _open_store, cli, refuse_process_local_store, store_option


@cli.command()
@store_option
@click.option(
    "--broker",
    "broker_url",
    envvar="DNNFRAME_BROKER_URL",
    default=None,
    metavar="URL",
    show_envvar=True,
    help="Send trials to Celery workers through this broker "
    "(default: a local process pool in this process).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    envvar="DNNFRAME_WORKERS",
    default=None,
    help="Local pool processes (without a broker; default: cores).",
)
@click.option(
    "--poll",
    "poll_s",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between looks at the store for new experiments.",
)
@click.option(
    "--exit-with-parent",
    "parent_pid",
    type=int,
    default=None,
    hidden=True,
    help="Stop when the process with this pid (the one that started this) ends.",
)
@click.option(
    "--supervise",
    is_flag=True,
    hidden=True,
    help="Run the service as a child process, started again whenever it ends.",
)
def drive(
    store_url: str | None,
    broker_url: str | None,
    workers: int | None,
    poll_s: float,
    parent_pid: int | None,
    supervise: bool,
) -> None:
    """Run the search drivers of stored tpe/cmaes experiments until stopped (Ctrl-C, SIGTERM).

    Each experiment is driven by one process at a time, whoever holds its store lease
    (renewed every few seconds; $DNNFRAME_DRIVER_LEASE_S, default 30, is how long a killed
    driver's lease outlives it). Run one or more anywhere the store is reachable;
    `dnnframe serve` starts one by itself.
    """
    from ..executors import make_executor
    from ..executors.pool_service import LocalPoolService, Service, serve
    from ..search.service import DriverService
    from ..store import default_store_url

    require("optuna", "search", "dnnframe drive")
    url = store_url or default_store_url()
    refuse_process_local_store(url, "dnnframe drive")
    logging.basicConfig(
        level=logging.INFO, format="%(created).3f %(process)d %(name)s %(levelname)s %(message)s"
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if supervise:
        # the child reads them from its environment: URLs may carry passwords, which must
        # not show on a command line
        env = settings.child_environ(
            store_url=url, broker_url=broker_url, workers=str(workers) if workers else None
        )
        supervise_child([*DRIVE, f"--poll={poll_s}"], stop, parent_pid, env=env)
        return
    store = _open_store(url)
    broker_url = broker_url or settings.get().broker_url

    def executor():  # noqa: ANN202 - made at the first trial
        return make_executor(url, broker_url=broker_url, workers=workers)

    services: list[Service] = []
    if broker_url:  # Celery's workers train, and their reapers recover
        drivers = DriverService(store, executor, poll_s=poll_s)
    else:  # the server's one pool: what the web processes hand it, recovery, the drivers'
        pool = LocalPoolService(store, executor)
        drivers = DriverService(store, pool.executor, poll_s=poll_s, owns_executor=False)
        services.append(pool)
    services.append(drivers)
    logging.getLogger(__name__).info(
        "driver service %s watching %s%s",
        drivers.owner,
        redact(url),
        "" if broker_url else " (the local pool)",
    )
    try:
        serve(services, stop, poll_s, parent_pid=parent_pid)
    finally:
        store.close()
