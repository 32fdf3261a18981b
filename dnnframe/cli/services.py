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


@cli.command()
@store_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--debug", is_flag=True)
@click.option("--production", is_flag=True,
              help="Serve with gunicorn: several worker processes, graceful shutdown, access log.")
@click.option("--web-workers", type=click.IntRange(min=1), default=None,
              help="gunicorn worker processes (implies --production; default "
                   "$WEB_CONCURRENCY or 2).")
def serve(store_url: str | None, host: str, port: int, debug: bool, production: bool,
          web_workers: int | None) -> None:
    """Start the dashboard (REST API and live experiment pages).

    Without --production one process serves it (Werkzeug's server, for a laptop); with it,
    gunicorn runs dashboard.wsgi:app with the settings in dashboard/gunicorn_config.py.
    Either way a child process runs the search drivers of tpe/cmaes experiments (`dnnframe
    drive`), started again if it dies.
    """

    from ..store import default_store_url

    # its trials train in a process pool or Celery workers, which cannot see such a store
    refuse_process_local_store(store_url or default_store_url(), "dnnframe serve")
    if store_url:
        # the app reads its configuration from the environment
        os.environ["DNNFRAME_STORE_URL"] = store_url
    # requests must name the address it listens on (or a local name): see DNNFRAME_ALLOWED_HOSTS
    os.environ.setdefault("DNNFRAME_BIND_HOST", host)
    for module in ("flask", "plotly", "limits", "optuna"):  # what dashboard/ imports
        require(module, "web", "the dashboard")
    if production or web_workers:
        require("gunicorn", "web", "dnnframe serve --production")
        bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        args = [sys.executable, "-m", "gunicorn", "--config", "python:dashboard.gunicorn_config",
                "--bind", bind]
        if web_workers:
            args += ["--workers", str(web_workers)]
        os.execv(sys.executable, [*args, "dashboard.wsgi:app"])
    try:
        from dashboard import create_app
    except ImportError as exc:
        raise DnnframeError(f"the dashboard package cannot be imported: {exc}") from None
    app = create_app()
    driver = None
    if os.environ.get("WERKZEUG_RUN_MAIN") != "true":
        # with --debug the reloader's parent lives as long as the server; its child, which
        # serves, is replaced on every reload
        driver = DriverChild().start()
    try:
        app.run(host=host, port=port, debug=debug)
    finally:
        if driver is not None:
            driver.stop()


# --------------------------------------------------------------------------- worker
@cli.command(context_settings={"ignore_unknown_options": True})
@store_option
@click.option("--broker", "broker_url", envvar="DNNFRAME_BROKER_URL", default=None, metavar="URL",
              show_envvar=True, help="Broker (default amqp://guest:guest@127.0.0.1:5672//).")
@click.option("--queues", "-Q", default="default", show_default=True,
              help="Comma-separated queues to consume: default (CPU), gpu, or your own.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), envvar="DNNFRAME_WORKERS",
              default=None, help="Processes, each training one trial at a time (default: cores).")
@click.option("--hostname", "-n", default=None, help="Node name (default celery@<host>).")
@click.option("--loglevel", "-l", default="INFO", show_default=True)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(store_url: str | None, broker_url: str | None, queues: str, concurrency: int | None,
           hostname: str | None, loglevel: str, celery_args: tuple[str, ...]) -> None:
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
    # The Celery app reads its configuration from the environment when it is imported.
    if store_url:
        os.environ["DNNFRAME_STORE_URL"] = store_url
    if broker_url:
        os.environ["DNNFRAME_BROKER_URL"] = broker_url
    names = [q.strip() for q in queues.split(",") if q.strip()]
    if not names:
        raise click.UsageError("--queues needs at least one queue name")
    if "gpu" in names and not os.environ.get("THEANO_FLAGS"):
        os.environ["THEANO_FLAGS"] = "device=cuda,floatX=float32"
    refuse_unusable_device("start the worker")
    for key, value in THREAD_ENV.items():
        os.environ.setdefault(key, value)
    from ..executors.celery_worker import worker_app

    app = worker_app()
    argv = ["worker", f"--queues={','.join(names)}",
            f"--concurrency={concurrency or settings.get().worker_count}",
            "--prefetch-multiplier=1", "-O", "fair", f"--loglevel={loglevel}"]
    if hostname:
        argv.append(f"--hostname={hostname}")
    app.worker_main(argv + list(celery_args))
