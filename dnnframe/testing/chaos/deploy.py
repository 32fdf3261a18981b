"""The chaos run's deployment, from the helpers the distributed tests use: Celery workers on
two hosts (network namespaces when this machine allows, else plain processes), a dedicated
RabbitMQ node, a dedicated PostgreSQL cluster (or one SQLite file every host opens: the
hosts share this machine's disk), the driver service (``dnnframe drive``), the
dashboard (``dnnframe serve``) and Flower (``celery -A tasks flower``, watching the workers'
events; no fault touches it). Every part can be broken and brought back by the fault
runner; everything is stopped and deleted on exit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests

from ..netns import NetnsHost, TcpForwarder, netns_hosts, netns_problem, subnet_of
from ..pgcluster import PgCluster, server_bin
from ..procs import REPO, WorkerProc, spawn_worker, wait_ready
from ..rabbit import RabbitNode, free_ports, rabbitmq_missing, start_rabbit_node

DATABASE = "chaos"
QUEUE = "default"  # the dashboard and the driver service publish there; the node is ours
TOKEN = "chaos-token"


#: The stores a deployment can have.
STORES = ("postgresql", "sqlite")
#: Fault kinds that need a store server (a SQLite file has none to stop, nor a disk of its own).
SERVER_KINDS = ("store_restart", "disk_full")


def deployment_missing(store: str = "postgresql") -> str | None:
    """Why the deployment cannot be made here (None when it can)."""
    if store == "postgresql" and server_bin() is None:
        return "no PostgreSQL server binaries (Debian's postgresql package) here"
    return rabbitmq_missing()


@dataclass
class Host:
    """Where one worker runs: a network namespace (``ns``) or this machine's own."""

    index: int
    ns: NetnsHost | None
    store_url: str
    broker_url: str
    worker: WorkerProc | None = None
    restarts: int = 0


@dataclass
class Service:
    """A ``python -m module`` command in a session of its own (the driver service and the
    dashboard are ``dnnframe`` commands; Flower is Celery's)."""

    name: str
    args: list[str]
    log: Path
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    module: str = "dnnframe.cli"

    def start(self) -> None:
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, *self.args],
                cwd=REPO,
                env=self.env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        """SIGKILL the whole process group (the serve's own driver child with it)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(20)
        self.kill()


@dataclass
class Deployment:
    workdir: Path
    settings: dict[str, str]  # DNNFRAME_* (and hook) variables of every process
    cluster: PgCluster | None  # None: a SQLite store
    store_url: str  # as this machine reaches it
    node: RabbitNode
    hosts: list[Host]
    driver: Service
    dashboard: Service
    base_url: str
    flower: Service
    flower_url: str
    forwarders: list[TcpForwarder] = field(default_factory=list)
    disk: Path | None = None  # the store's own small filesystem, when it has one
    store_stopped: bool = False  # by a store_restart fault, not yet undone

    @property
    def server(self) -> PgCluster:
        """The store's server, for the faults that need one."""
        if self.cluster is None:
            raise RuntimeError(
                f"a SQLite store has no server: {', '.join(SERVER_KINDS)} need the PostgreSQL store"
            )
        return self.cluster

    @property
    def netns(self) -> bool:
        return all(h.ns is not None for h in self.hosts)

    def _env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DNNFRAME_")}
        env.update(
            {
                "PYTHONPATH": str(REPO),
                "PYTHONUNBUFFERED": "1",
                **self.settings,
                "DNNFRAME_DATA_DIR": str(self.workdir / "data"),
                **extra,
            }
        )
        return env

    def start_worker(self, host: Host, wait: bool = True) -> WorkerProc:
        """A new worker on ``host`` (a killed one's successor); ``wait``: until it is ready."""
        host.restarts += 1
        name = f"h{host.index}w{host.restarts}"
        ns = host.ns.name if host.ns else None
        host.worker = spawn_worker(
            name,
            QUEUE,
            self.workdir / f"{name}.log",
            self._env(DNNFRAME_STORE_URL=host.store_url, DNNFRAME_BROKER_URL=host.broker_url),
            host=ns or f"chaos-host{host.index}",
            netns=ns,
        )
        problem = wait_ready(host.worker, 120) if wait else None
        if problem:
            raise RuntimeError(problem)
        return host.worker

    def start_dashboard(self) -> None:
        """``dnnframe serve`` on its port again, waited for until /api/v1/health answers."""
        _start_answering(self.dashboard, self.base_url + "/api/v1/health")

    def start_flower(self) -> None:
        """Flower, waited for until /healthcheck answers."""
        _start_answering(self.flower, self.flower_url + "/healthcheck")

    def fill_disk(self) -> None:
        """Fill the store's filesystem (a small tmpfs) to its last byte."""
        if self.disk is None:
            raise RuntimeError("disk_full needs the store on a small filesystem (small_disk)")
        block = b"\0" * 2**20
        # written, not allocated in one call: the server writes meanwhile, so the free space
        # measured first may no longer be there; full is the first write that fails
        with open(self.disk / "filler", "wb", buffering=0) as fh:
            while True:
                try:
                    fh.write(block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break

    def free_disk(self) -> None:
        """Free the store's filesystem, and start the server if it is not running (as a
        supervisor would: PostgreSQL stops for good when it cannot write its WAL)."""
        if self.disk is not None:
            (self.disk / "filler").unlink(missing_ok=True)
            if not self.store_stopped and not self.server.running():
                self.server.start()

    def stop_store(self) -> None:
        self.store_stopped = True
        if self.server.running():
            self.server.ctl("-m", "fast", "stop")

    def start_store(self) -> None:
        self.store_stopped = False
        if self.disk is not None and (self.disk / "filler").exists():
            return  # it cannot start on a full disk: free_disk starts it
        self.server.start()


def _start_answering(service: Service, url: str) -> None:
    """Start ``service`` and wait until ``url`` answers: anything but a 5xx, or a 503 (the
    dashboard refuses while the store is down, which another fault may hold down)."""
    service.start()
    deadline = time.monotonic() + 90
    while True:
        with contextlib.suppress(requests.RequestException):
            status = requests.get(url, timeout=2).status_code
            if status < 500 or status == 503:
                return
        proc = service.proc
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            raise RuntimeError(
                f"the {service.name} did not start:\n"
                f"{service.log.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.2)


def _services(
    workdir: Path, env: dict[str, str], store_url: str, broker_url: str
) -> tuple[Service, Service, str, Service, str]:
    port, flower_port = free_ports(2)
    driver = Service(
        "driver",
        ["drive", "--store", store_url, "--broker", broker_url, "--poll", "0.5"],
        workdir / "driver.log",
        env,
    )
    dashboard = Service(
        "dashboard",
        ["serve", "--port", str(port), "--store", store_url],
        workdir / "dashboard.log",
        {**env, "DNNFRAME_BROKER_URL": broker_url, "DNNFRAME_API_TOKEN": TOKEN},
    )
    # on the loopback only, so its API needs no login here
    flower = Service(
        "flower",
        ["-A", "tasks", "flower", f"--port={flower_port}", "--address=127.0.0.1"],
        workdir / "flower.log",
        {
            **env,
            "DNNFRAME_BROKER_URL": broker_url,
            "DNNFRAME_STORE_URL": store_url,
            "FLOWER_UNAUTHENTICATED_API": "1",
        },
        module="celery",
    )
    return (
        driver,
        dashboard,
        f"http://127.0.0.1:{port}",
        flower,
        f"http://127.0.0.1:{flower_port}",
    )


@contextlib.contextmanager
def _namespaces(use: bool) -> Iterator[list[NetnsHost | None]]:
    if use and netns_problem() is None:
        with netns_hosts(2) as made:
            yield list(made)
    else:
        yield [None, None]


@contextlib.contextmanager
def _small_disk(workdir: Path, use: bool) -> Iterator[Path | None]:
    """A 160 MiB tmpfs for the store's files (root only), unmounted on exit."""
    if not use:
        yield None
        return
    disk = workdir / "store-disk"
    disk.mkdir(exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=160m,mode=0777", "tmpfs", str(disk)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)


@contextlib.contextmanager
def _store(
    workdir: Path, store: str, spaces: list[NetnsHost | None], disk: Path | None
) -> Iterator[tuple[PgCluster | None, Callable[[str], str]]]:
    """The store's server (None for SQLite) and its URL as seen from an address."""
    if store not in STORES:
        raise ValueError(f"store must be one of {', '.join(STORES)}, got {store!r}")
    if store == "sqlite":
        (workdir / "store").mkdir(exist_ok=True)
        path = workdir / "store" / "chaos.db"
        yield None, lambda address: f"sqlite:///{path}"
        return
    made = [ns for ns in spaces if ns is not None]
    addresses = [ns.address for ns in made]
    trusted = [subnet_of(made)] if made else []
    with PgCluster(free_ports(1)[0], addresses, trusted, parent=disk) as cluster:
        try:
            cluster.create_database(DATABASE)
            yield cluster, lambda address: cluster.url(DATABASE, address)
        finally:
            if cluster.log.exists():  # the cluster's files go with it
                (workdir / "postgresql.log").write_bytes(cluster.log.read_bytes())


@contextlib.contextmanager
def deployment(
    workdir: Path,
    settings: dict[str, str],
    use_netns: bool = True,
    small_disk: bool = False,
    store: str = "postgresql",
) -> Iterator[Deployment]:
    """Start every part (workers ready, dashboard answering) and stop them all on exit;
    ``small_disk`` puts the store's files on a filesystem of their own (for disk_full);
    ``store``: ``postgresql`` (a cluster of its own) or ``sqlite`` (a file)."""
    problem = deployment_missing(store)
    if problem:
        raise RuntimeError(problem)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "rabbit").mkdir(exist_ok=True)
    with (
        _small_disk(workdir, small_disk) as disk,
        _namespaces(use_netns) as spaces,
        _store(workdir, store, spaces, disk) as (cluster, store_at),
    ):
        node = start_rabbit_node(workdir / "rabbit")
        forwarders: list[TcpForwarder] = []
        try:
            hosts = []
            for i, ns in enumerate(spaces):
                if ns is None:
                    hosts.append(Host(i, None, store_at("127.0.0.1"), node.url))
                    continue
                fwd = TcpForwarder((ns.address, 0), ("127.0.0.1", node.port))
                forwarders.append(fwd)
                hosts.append(
                    Host(
                        i,
                        ns,
                        store_at(ns.address),
                        node.url.replace(f"127.0.0.1:{node.port}", f"{ns.address}:{fwd.port}"),
                    )
                )
            base_env = {k: v for k, v in os.environ.items() if not k.startswith("DNNFRAME_")}
            env = {
                **base_env,
                "PYTHONPATH": str(REPO),
                "PYTHONUNBUFFERED": "1",
                **settings,
                "DNNFRAME_DATA_DIR": str(workdir / "data"),
            }
            store_url = store_at("127.0.0.1")
            driver, dashboard, base, flower, flower_url = _services(
                workdir, env, store_url, node.url
            )
            dep = Deployment(
                workdir,
                settings,
                cluster,
                store_url,
                node,
                hosts,
                driver,
                dashboard,
                base,
                flower,
                flower_url,
                forwarders,
                disk,
            )
            yield from _running(dep)
        finally:
            for fwd in forwarders:
                fwd.close()
            node.stop()


def _running(dep: Deployment) -> Iterator[Deployment]:
    try:
        dep.start_flower()  # first: it sees every worker come online
        for host in dep.hosts:
            dep.start_worker(host)
        dep.driver.start()
        dep.start_dashboard()
        yield dep
    finally:
        dep.flower.stop()
        dep.dashboard.stop()
        dep.driver.stop()
        for host in dep.hosts:
            if host.worker is not None:
                host.worker.kill_group(signal.SIGCONT)  # a stopped group cannot end itself
                host.worker.stop()
        for host in dep.hosts:
            if host.ns is not None:
                with contextlib.suppress(RuntimeError):
                    host.ns.set_link(True)
