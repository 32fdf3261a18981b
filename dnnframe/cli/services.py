"""Long-running commands: ``dnnframe serve`` (the dashboard) and ``dnnframe worker``."""

from __future__ import annotations

import os
import sys

import click

from .. import settings
from ..exceptions import DnnframeError
from ..extras import require
from ..search.child import DriverChild
from .common import cli, refuse_process_local_store, refuse_unusable_device, store_option

# What a worker consuming the gpu queue trains with unless THEANO_FLAGS says otherwise.
GPU_FLAGS = "device=cuda,floatX=float32"


@cli.command()
@store_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--debug", is_flag=True)
@click.option(
    "--production",
    is_flag=True,
    help="Serve with gunicorn: several worker processes, graceful shutdown, access log.",
)
@click.option(
    "--web-workers",
    type=click.IntRange(min=1),
    default=None,
    help="gunicorn worker processes (implies --production; default $WEB_CONCURRENCY or 2).",
)
def serve(
    store_url: str | None,
    host: str,
    port: int,
    debug: bool,
    production: bool,
    web_workers: int | None,
) -> None:
    """Start the dashboard (REST API and live experiment pages).

    Without --production one process serves it (Werkzeug's server, for a laptop); with it,
    gunicorn runs dashboard.wsgi:app with the settings in dashboard/gunicorn_config.py.
    Either way a child process runs the search drivers of tpe/cmaes experiments (`dnnframe
    drive`), started again if it dies.
    """

    from ..store import default_store_url

    # its trials train in a process pool or Celery workers, which cannot see such a store
    refuse_process_local_store(store_url or default_store_url(), "dnnframe serve")
    current = settings.get()
    # requests must name the address it listens on (or a local name): see DNNFRAME_ALLOWED_HOSTS
    app_settings = current.replace(store_url=store_url, bind_host=current.bind_host or host)
    for module in ("flask", "plotly", "limits", "optuna"):  # what dashboard/ imports
        require(module, "web", "the dashboard")
    if production or web_workers:
        require("gunicorn", "web", "dnnframe serve --production")
        bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        args = [
            sys.executable,
            "-m",
            "gunicorn",
            "--config",
            "python:dashboard.gunicorn_config",
            "--bind",
            bind,
        ]
        if web_workers:
            args += ["--workers", str(web_workers)]
        os.execve(
            sys.executable,
            [*args, "dashboard.wsgi:app"],
            settings.child_environ(store_url=store_url, bind_host=app_settings.bind_host),
        )
    try:
        from dashboard import create_app
    except ImportError as exc:
        raise DnnframeError(f"the dashboard package cannot be imported: {exc}") from None
    # without a broker the driver service's pool trains the trials this server submits
    app = create_app({"LOCAL_POOL": "service"}, settings=app_settings)
    driver = None
    if os.environ.get("WERKZEUG_RUN_MAIN") != "true":
        # with --debug the reloader's parent lives as long as the server; its child, which
        # serves, is replaced on every reload
        driver = DriverChild(store_url).start()
    try:
        app.run(host=host, port=port, debug=debug)
    finally:
        if driver is not None:
            driver.stop()


# --------------------------------------------------------------------------- worker
@cli.command(context_settings={"ignore_unknown_options": True})
@store_option
@click.option(
    "--broker",
    "broker_url",
    envvar="DNNFRAME_BROKER_URL",
    default=None,
    metavar="URL",
    show_envvar=True,
    help="Broker (default amqp://guest:guest@127.0.0.1:5672//).",
)
@click.option(
    "--queues",
    "-Q",
    default="default",
    show_default=True,
    help="Comma-separated queues to consume: default (CPU), gpu, or your own.",
)
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(min=1),
    envvar="DNNFRAME_WORKERS",
    default=None,
    help="Processes, each training one trial at a time (default: cores).",
)
@click.option("--hostname", "-n", default=None, help="Node name (default celery@<host>).")
@click.option("--loglevel", "-l", default="INFO", show_default=True)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(
    store_url: str | None,
    broker_url: str | None,
    queues: str,
    concurrency: int | None,
    hostname: str | None,
    loglevel: str,
    celery_args: tuple[str, ...],
) -> None:
    """Start a Celery worker (``celery -A tasks worker`` with dnnframe's defaults).

    Arguments after ``--`` go to ``celery worker`` as they are (``-- --without-mingle``).

    One trial per process at a time (prefetch 1, fair scheduling), messages acknowledged
    only when a trial finished. A worker consuming ``gpu`` gets THEANO_FLAGS=device=cuda
    unless THEANO_FLAGS is already set. A worker whose flags ask for a device it cannot
    use (a GPU where there is none, or jax without CUDA) refuses to start.
    """

    from ..executors import THREAD_ENV
    from ..store import default_store_url

    require("celery", "celery", "dnnframe worker")
    refuse_process_local_store(store_url or default_store_url(), "dnnframe worker")
    names = [q.strip() for q in queues.split(",") if q.strip()]
    if not names:
        raise click.UsageError("--queues needs at least one queue name")
    # The worker (``celery -A tasks worker``, its pool processes and the reaper) reads its
    # configuration from its environment: built here for it, this process's left as it is.
    flags = None if os.environ.get("THEANO_FLAGS") or "gpu" not in names else GPU_FLAGS
    env = settings.child_environ(
        {"THEANO_FLAGS": flags},
        base={**THREAD_ENV, **os.environ},
        store_url=store_url,
        broker_url=broker_url,
    )
    refuse_unusable_device("start the worker", env)
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "tasks",
        "worker",
        f"--queues={','.join(names)}",
        f"--concurrency={concurrency or settings.get().worker_count}",
        "--prefetch-multiplier=1",
        "-O",
        "fair",
        f"--loglevel={loglevel}",
    ]
    if hostname:
        argv.append(f"--hostname={hostname}")
    os.execve(sys.executable, argv + list(celery_args), env)
