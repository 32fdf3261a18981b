"""Workers on two hosts that are network namespaces (see dnnframe/testing/netns.py): each host reaches the
broker and the store only through its own veth cable, on the root side's address, so a
cable can be cut while its worker goes on. The store is PostgreSQL on a cluster this
module starts (so it can be restarted mid-sweep); the broker is the machine's RabbitMQ,
offered on each cable's address by a forwarder. Real ``celery -A tasks worker`` processes
training with ``tasks.hooks:sleepy_train``; default settings (a dead host's trials are
released after the 30 s node timeout).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from dnnframe.executors import CeleryExecutor
from dnnframe.executors.liveness import live_nodes
from dnnframe.store import TrialState, open_store
from dnnframe.store.base import ResultStore
from dnnframe.submit import submit_experiment
from dnnframe.testing.netns import NetnsHost, TcpForwarder, netns_hosts, netns_problem, subnet_of
from dnnframe.testing.pgcluster import PgCluster, server_bin
from dnnframe.testing.rabbit import free_ports

from .conftest import REPO, SLEEPY, WorkerProc, make_spec, wait_until, worker_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hosts() -> Iterator[list[NetnsHost]]:
    """Two hosts (network namespaces with a cable each); deleted afterwards."""
    problem = netns_problem()
    if problem is None and server_bin() is None:
        problem = "no PostgreSQL server binaries (Debian's postgresql package) here"
    if problem:
        pytest.skip(problem)
    with netns_hosts(2) as made:
        yield made


@pytest.fixture(scope="module")
def cluster(hosts: list[NetnsHost]) -> Iterator[PgCluster]:
    """This module's PostgreSQL cluster, listening on each cable's root-side address."""
    (port,) = free_ports(1)
    with PgCluster(port, [h.address for h in hosts], [subnet_of(hosts)]) as started:
        yield started


@pytest.fixture(scope="module")
def host_brokers(hosts: list[NetnsHost], broker_url: str) -> Iterator[dict[str, str]]:
    """The machine's broker (on 127.0.0.1 only) offered on each cable's address: the URL a
    worker of each host uses, by host name."""
    parts = urlsplit(broker_url)
    forwarders = {
        h.name: TcpForwarder((h.address, 0), (parts.hostname, parts.port or 5672)) for h in hosts
    }
    try:
        yield {
            name: urlunsplit(
                parts._replace(
                    netloc=f"{parts.username}:{parts.password}@{hosts[i].address}:{f.port}"
                )
            )
            for i, (name, f) in enumerate(forwarders.items())
        }
    finally:
        for f in forwarders.values():
            f.close()


@pytest.fixture
def database(cluster: PgCluster) -> str:
    """A fresh database of this test on the module's cluster (gone with the cluster)."""
    name = f"dnnframe_{uuid.uuid4().hex[:10]}"
    cluster.create_database(name)
    return name


@pytest.fixture
def pg_store(cluster: PgCluster, database: str) -> Iterator[ResultStore]:
    """The test's own view of the store (from the root namespace, on 127.0.0.1)."""
    opened = open_store(cluster.url(database))
    yield opened
    opened.close()


@pytest.fixture
def start_hosts(
    start_worker: Callable[..., WorkerProc],
    hosts: list[NetnsHost],
    cluster: PgCluster,
    database: str,
    host_brokers: dict[str, str],
    queue_name: str,
    pg_store: ResultStore,
) -> Callable[..., list[WorkerProc]]:
    """Factory: ``start_hosts(env_a, env_b)`` → one sleepy worker (one process) on each
    host, each with its extra environment, both registered in the store."""

    def start(*envs: dict[str, str]) -> list[WorkerProc]:
        assert "DNNFRAME_HEARTBEAT_TIMEOUT" not in os.environ  # the defaults apply
        workers = [
            start_worker(
                queue_name,
                host=h.name,
                netns=h.name,
                DNNFRAME_TRAIN_FN=SLEEPY,
                DNNFRAME_STORE_URL=cluster.url(database, h.address),
                DNNFRAME_BROKER_URL=host_brokers[h.name],
                **env,
            )
            for h, env in zip(hosts, envs)
        ]
        wait_until(
            lambda: (
                {w.name for w in live_nodes(pg_store, queue_name)} == {w.nodename for w in workers}
            ),
            60,
            "both hosts to register in the store",
        )
        return workers

    return start


def _hook_env(epochs: int, epoch_s: float, log: Path) -> dict[str, str]:
    return {
        "DNNFRAME_HOOK_EPOCHS": str(epochs),
        "DNNFRAME_HOOK_EPOCH_SECONDS": str(epoch_s),
        "DNNFRAME_HOOK_LOG": str(log),
    }


def _completions(log: Path) -> Counter:
    """How often each seed was trained to the end (sleepy_train's log)."""
    return Counter(json.loads(line)["seed"] for line in log.read_text().splitlines())


def _host_of(trial) -> str:
    return trial.worker.split(":")[0].split("@")[1]


def _running_on(store: ResultStore, experiment_id: str, w: WorkerProc) -> list[str]:
    """Trials ``w`` holds and has recorded an epoch of."""
    return [
        t.id
        for t in store.list_trials(experiment_id, state=TrialState.RUNNING)
        if t.worker.startswith(f"{w.nodename}:") and t.metrics
    ]


def test_a_sweep_is_shared_by_workers_on_two_hosts(
    broker_url, cluster, database, queue_name, hosts, start_hosts, pg_store, tmp_path: Path
):
    """Each host reaches the broker and the store only over its cable: a 12-trial sweep
    completes, every trial once, and both hosts trained some."""
    done = tmp_path / "completions.jsonl"
    start_hosts(*[_hook_env(2, 0.2, done)] * 2)
    spec = make_spec("netns-shared", 12)
    with CeleryExecutor(broker_url, cluster.url(database), queue=queue_name) as ex:
        submit_experiment(spec, pg_store, ex, pack_size=1)
        assert ex.wait(timeout=120), pg_store.counts_by_state(spec.experiment_id)
    trials = pg_store.list_trials(spec.experiment_id)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 12
    assert [t.attempts for t in trials] == [1] * 12
    assert sorted(_completions(done).values()) == [1] * 12
    assert Counter(_host_of(t) for t in trials).keys() == {h.name for h in hosts}
    # and they reached the store from their own addresses, over their cables
    assert cluster.clients(database) >= {h.peer_address for h in hosts}


def test_a_host_cut_off_mid_sweep(
    broker_url, cluster, database, queue_name, hosts, start_hosts, pg_store, tmp_path: Path
):
    """Pull out host A's cable while it trains a pack of 2: host B's reaper releases the pack
    after the node timeout and B trains it. Plug the cable back
    in: A's late writes are refused (the trials are B's now), every trial is COMPLETE once,
    and each curve was written by one owner only (each host's epochs last a different
    number of seconds, so every stored epoch tells which host wrote it)."""
    done = tmp_path / "completions.jsonl"
    a_epoch_s, b_epoch_s = 0.5, 0.3
    a, b = start_hosts(_hook_env(4, a_epoch_s, done), _hook_env(4, b_epoch_s, done))
    cable = hosts[0]
    spec = make_spec("netns-cut", 8)
    with CeleryExecutor(broker_url, cluster.url(database), queue=queue_name) as ex:
        result = submit_experiment(spec, pg_store, ex, pack_size=2)
        assert len(result.packs) == 4
        wait_until(
            lambda: _running_on(pg_store, spec.experiment_id, a),
            60,
            "host A to be an epoch into a pack",
        )
        lost = {
            t.id
            for t in pg_store.list_trials(spec.experiment_id, state=TrialState.RUNNING)
            if t.worker.startswith(f"{a.nodename}:")
        }
        cable.set_link(False)
        cut_at = time.time()
        try:
            wait_until(
                lambda: all(
                    (pg_store.get_trial(tid).worker or "").startswith(f"{b.nodename}:")
                    for tid in lost
                ),
                120,
                "host B to take host A's pack",
            )
            recovered_s = min(pg_store.get_trial(tid).started_at for tid in lost) - cut_at
        finally:
            cable.set_link(True)
        up_at = time.time()
        wait_until(
            lambda: (
                "another worker owns it now" in a.log_text()
                or "the store refused its final state" in a.log_text()
            ),
            180,
            "host A, back on the network, to be refused its late writes",
        )
        refused_s = time.time() - up_at
        assert ex.wait(timeout=120), pg_store.counts_by_state(spec.experiment_id)
    print(
        f"cable cut: host A's pack of {len(lost)} started again on host B "
        f"{recovered_s:.1f}s after the cut; A's late writes refused {refused_s:.1f}s after "
        "the cable was back"
    )
    # released by B's reaper (the node timeout), not left for the 300 s heartbeat timeout,
    # which the 120 s wait above could not outlast
    assert all(f"reaper: trial {tid}" in b.log_text() for tid in lost), b.log_text()[-3000:]
    trials = {t.id: t for t in pg_store.list_trials(spec.experiment_id)}
    assert [t.state for t in trials.values()] == [TrialState.COMPLETE] * 8
    for t in trials.values():
        # one owner: the curve is whole, each epoch once, every epoch written by the host
        # that finished the trial, and the result is that owner's run
        owner_s = b_epoch_s if t.worker.startswith(f"{b.nodename}:") else a_epoch_s
        assert [m["epoch"] for m in t.metrics] == [1, 2, 3, 4], (t.id, t.metrics)
        assert {m["seconds"] for m in t.metrics} == {owner_s}, (t.id, t.worker, t.metrics)
        assert t.result["history"] == t.metrics
        assert str(t.result["environment"]["pid"]) == t.worker.rsplit(":", 1)[1]
    assert all(trials[tid].attempts == 2 for tid in lost)
    seeds = {trials[tid].config["seed"] for tid in lost}
    completions = _completions(done)
    assert all(completions[s] == 1 for s in completions if s not in seeds), completions
    assert all(completions[s] in (1, 2) for s in seeds), completions


# A store write of host A that, when told, stops before its COMMIT until told to go on:
# its transaction holds the change counter (every write that gives a seq takes it) meanwhile.
_WRITER = """
import sys, psycopg
from dnnframe.store import open_store
store = open_store(sys.argv[1])
store.create_experiment("cut-writer", "cut-writer", {}, 1)
commit = psycopg.Connection.commit
def held_commit(conn):
    print("holding", flush=True)
    sys.stdin.readline()
    commit(conn)
psycopg.Connection.commit = held_commit
print("ready", flush=True)
sys.stdin.readline()
store.create_trials("cut-writer", [("t-cut-writer", {})])
"""


def test_a_host_cut_off_in_the_middle_of_a_store_write(
    broker_url,
    cluster,
    database,
    queue_name,
    hosts,
    start_worker,
    host_brokers,
    pg_store,
    tmp_path: Path,
):
    """Host A's cable is cut between the statements of a store write (it has locked the
    change counter that every seq-giving write takes; its COMMIT goes into the cut cable):
    the server ends A's session after a short idle-in-transaction limit, so host B's
    worker goes on with its sweep instead of waiting for A's commit forever."""
    a, b = hosts
    done = tmp_path / "completions.jsonl"
    worker = start_worker(
        queue_name,
        host=b.name,
        netns=b.name,
        DNNFRAME_TRAIN_FN=SLEEPY,
        DNNFRAME_STORE_URL=cluster.url(database, b.address),
        DNNFRAME_BROKER_URL=host_brokers[b.name],
        **_hook_env(2, 0.2, done),
    )
    spec = make_spec("netns-cut-writer", 12)
    writer = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            a.name,
            sys.executable,
            "-c",
            _WRITER,
            cluster.url(database, a.address),
        ],
        cwd=REPO,
        env=worker_env("", ""),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    def tell(line: str) -> None:
        writer.stdin.write(f"{line}\n")
        writer.stdin.flush()

    try:
        assert writer.stdout.readline().strip() == "ready"  # blocks until it is
        with CeleryExecutor(broker_url, cluster.url(database), queue=queue_name) as ex:
            submit_experiment(spec, pg_store, ex, pack_size=1)
            wait_until(
                lambda: pg_store.counts_by_state(spec.experiment_id)["COMPLETE"] >= 2,
                60,
                "host B's sweep to be under way",
            )
            tell("hold")
            assert writer.stdout.readline().strip() == "holding"
            a.set_link(False)
            try:
                tell("go")  # its COMMIT goes into the cut cable
                left = pg_store.counts_by_state(spec.experiment_id)
                assert left["QUEUED"] + left["RUNNING"] > 0, left
                assert ex.wait(timeout=120), pg_store.counts_by_state(spec.experiment_id)
            finally:
                a.set_link(True)
    finally:
        os.killpg(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)
    trials = pg_store.list_trials(spec.experiment_id)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 12
    assert all(t.worker.startswith(f"{worker.nodename}:") for t in trials)
    assert sorted(_completions(done).values()) == [1] * 12
    assert "terminating connection due to idle-in-transaction timeout" in cluster.log.read_text()


def test_the_store_restarts_mid_sweep(
    broker_url, cluster, database, queue_name, hosts, start_hosts, pg_store, tmp_path: Path
):
    """Restart the PostgreSQL server (``pg_ctl restart -m fast``, every session ends) while
    both hosts train: the workers wait for it and go on; every trial completes once with
    its whole curve."""
    done = tmp_path / "completions.jsonl"
    start_hosts(*[_hook_env(3, 0.3, done)] * 2)
    spec = make_spec("netns-restart", 16)
    with CeleryExecutor(broker_url, cluster.url(database), queue=queue_name) as ex:
        submit_experiment(spec, pg_store, ex, pack_size=1)

        def mid_sweep() -> bool:
            counts = pg_store.counts_by_state(spec.experiment_id)
            return counts["COMPLETE"] >= 2 and counts["RUNNING"] >= 1

        wait_until(mid_sweep, 60, "the sweep to be under way")
        restarted_at = time.time()
        cluster.restart()
        left = pg_store.counts_by_state(spec.experiment_id)
        assert left["QUEUED"] + left["RUNNING"] > 0, left
        assert ex.wait(timeout=150), pg_store.counts_by_state(spec.experiment_id)
        # both hosts went on on new sessions (the restart ended every old one)
        assert cluster.clients(database, since=restarted_at) >= {h.peer_address for h in hosts}
    trials = pg_store.list_trials(spec.experiment_id)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 16
    assert all([m["epoch"] for m in t.metrics] == [1, 2, 3] for t in trials)
    assert sorted(_completions(done).values()) == [1] * 16
