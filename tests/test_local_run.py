"""LocalExecutor: real worker processes, a real SQLite file.

Training functions are injected (module-level so spawned workers can import them): one
kills its own process to show a crashing trial is recorded FAILED and the sweep goes on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dnnframe import settings
from dnnframe.engine.result import TrialResult
from dnnframe.executors import LocalExecutor
from dnnframe.executors.local_queue import PackQueue, QueuedPack
from dnnframe.executors.packing import make_packs, resolve_pack_size
from dnnframe.spec import expand_with_ids, parse_spec
from dnnframe.store import TrialState, open_store
from dnnframe.submit import submit_experiment
from dnnframe.testing.packs import one_by_one


def _spec(seeds: int, name: str = "local-test", epochs: int = 2) -> dict:
    return {
        "name": name,
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": 1, "width": 8},
        "training": {"max_epochs": epochs, "batch_size": 32},
        "search": {"seeds": seeds},
    }


def _ok(epochs: int = 1, **env) -> TrialResult:
    return TrialResult(
        status="COMPLETE",
        metrics={"test_accuracy": 0.5},
        history=[{"epoch": 1}],
        timings={"train": 0.0, "total": 0.0},
        n_params=1,
        environment=env,
        epochs_run=epochs,
    )


def crash_on_seed_1(config, on_epoch=None):
    """Seed 1 dies the way an out-of-memory kill does: SIGKILL, no Python cleanup."""
    if config.seed == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return _ok()


def exit_on_seed_2(config, on_epoch=None):
    if config.seed == 2:
        os._exit(3)
    return _ok()


def report_threads(config, on_epoch=None):
    import numpy  # noqa: F401  (loads OpenBLAS so threadpoolctl sees it)
    from threadpoolctl import threadpool_info

    return _ok(
        pid=os.getpid(),
        env={
            k: os.environ.get(k)
            for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
        },
        blas_threads=[p["num_threads"] for p in threadpool_info()],
    )


def hold_seed_0(config, on_epoch=None):
    """Seed 0 trains until the file ``$HOLD_FILE`` exists (a minute at most); others end at
    once. The test decides when the held trial ends."""
    if config.seed == 0:
        release = Path(os.environ["HOLD_FILE"])
        deadline = time.monotonic() + 60
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return _ok()


@pytest.fixture
def url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'local.db'}"


def _ignores_sigint(pid: int) -> bool:
    """Whether the process has SIGINT ignored (its /proc status's SigIgn mask)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = int(
        next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16
    )
    return bool(mask & (1 << (signal.SIGINT - 1)))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_ctrl_c_while_workers_still_import_leaves_them_running_and_silent(url, capfd):
    """Ctrl-C reaches the whole process group; a worker that is still importing (a third of
    a second and more) ignores it from its first line of dnnframe code on, and starts."""
    with LocalExecutor(url, workers=2) as ex:
        pids = [w.process.pid for w in ex._pool]
        deadline = time.monotonic() + 60
        while not all(_ignores_sigint(pid) for pid in pids):  # the entry has run
            assert time.monotonic() < deadline, "the workers never ignored SIGINT"
            time.sleep(0.005)
        sent = 0
        while not ex.wait_ready(timeout=0.01):  # Ctrl-C after Ctrl-C while they import
            for pid in pids:
                os.kill(pid, signal.SIGINT)
                sent += 1
            assert time.monotonic() < deadline, "the workers never became ready"
        assert sent and all(w.process.is_alive() for w in ex._pool)
        assert [w.process.pid for w in ex._pool] == pids  # none died and was replaced
    err = capfd.readouterr().err
    assert "KeyboardInterrupt" not in err and "Traceback" not in err, err


def test_a_worker_ignores_ctrl_c_before_it_imports_the_executors(tmp_path):
    """The spawned worker's entry ignores SIGINT before the first heavy import: a fresh
    interpreter runs it with a hook that notes SIGINT's handler when ``dnnframe.executors``
    is imported."""
    script = tmp_path / "entry.py"
    script.write_text(
        "import signal, sys\n"
        "seen = []\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'dnnframe.executors':\n"
        "            seen.append(signal.getsignal(signal.SIGINT))\n"
        "        return None\n"
        "sys.meta_path.insert(0, Watch())\n"
        "from dnnframe import spawned\n"
        "assert 'dnnframe.executors' not in sys.modules\n"
        "try:\n"
        "    spawned.local_worker(None, 'sqlite:///:memory:', None, None)\n"
        "except Exception:\n"
        "    pass  # no pipe to the parent: the worker stops; its imports were made\n"
        "print(seen[0] is signal.SIG_IGN)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.stdout.strip() == "True", out.stdout + out.stderr


def test_a_trial_that_kills_its_process_is_failed_and_the_sweep_goes_on(url):
    store = open_store(url)
    with LocalExecutor(url, workers=2, train_fn=one_by_one(crash_on_seed_1)) as ex:
        result = submit_experiment(parse_spec(_spec(seeds=5)), store, ex)
        assert ex.wait(timeout=120), "the sweep did not finish"
        stats = ex.stats
    trials = {t.config["seed"]: t for t in store.list_trials(result.experiment.id)}
    assert trials[1].state is TrialState.FAILED
    assert "SIGKILL" in trials[1].error and "out-of-memory" in trials[1].error
    assert all(trials[s].state is TrialState.COMPLETE for s in (0, 2, 3, 4))
    assert stats.crashed == 1 and stats.worker_restarts >= 1


def test_a_worker_exit_code_is_reported(url):
    store = open_store(url)
    with LocalExecutor(url, workers=1, train_fn=one_by_one(exit_on_seed_2)) as ex:
        result = submit_experiment(parse_spec(_spec(seeds=4)), store, ex)
        assert ex.wait(timeout=120)
    trials = {t.config["seed"]: t for t in store.list_trials(result.experiment.id)}
    assert trials[2].state is TrialState.FAILED and "exited with code 3" in trials[2].error
    assert [trials[s].state for s in (0, 1, 3)] == [TrialState.COMPLETE] * 3


def test_workers_pin_math_libraries_to_one_thread_and_are_reused(url, monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "7")  # the parent's own setting
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    store = open_store(url)
    with LocalExecutor(url, workers=2, train_fn=one_by_one(report_threads)) as ex:
        result = submit_experiment(parse_spec(_spec(seeds=6)), store, ex)
        assert ex.wait(timeout=120)
    envs = [t.result["environment"] for t in store.list_trials(result.experiment.id)]
    assert all(
        e["env"] == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        for e in envs
    )
    assert all(n == 1 for e in envs for n in e["blas_threads"])
    # long-lived workers: 6 trials ran in at most 2 processes
    assert len({e["pid"] for e in envs}) <= 2
    # the parent's own environment was left alone
    assert os.environ["OPENBLAS_NUM_THREADS"] == "7" and "OMP_NUM_THREADS" not in os.environ


def test_real_engine_compiles_once_per_graph_shape_per_worker(url):
    store = open_store(url)
    with LocalExecutor(url, workers=1) as ex:
        # one trial per pack: the worker's first pack compiles, the next ones reuse it
        result = submit_experiment(
            parse_spec(_spec(seeds=3, name="compile-cache")), store, ex, pack_size=1
        )
        assert ex.wait(timeout=300)
        doc = _spec(seeds=3, name="compile-cache-pack")
        doc["search"]["seeds"] = [10, 11, 12]  # other trials than the ones above
        packed = submit_experiment(parse_spec(doc), store, ex)
        assert ex.wait(timeout=300)
    trials = sorted(store.list_trials(result.experiment.id), key=lambda t: t.config["seed"])
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert len({t.worker for t in trials}) == 1
    # the first trial of the worker compiles (or loads the on-disk cache); the others
    # reuse the function compiled in the same process
    hits = [t.result["environment"]["compile_cache_hit"] for t in trials]
    assert sorted(hits) == [False, True, True], hits
    # automatic packing puts the three seeds of one graph into one pack: one compiled
    # function trains them together, and each is an ordinary COMPLETE trial with its curve
    members = store.list_trials(packed.experiment.id)
    assert packed.packs == [packed.trial_ids]
    assert {t.state for t in members} == {TrialState.COMPLETE}
    assert len({t.result["pack"]["id"] for t in members}) == 1
    assert sorted(t.result["pack"]["index"] for t in members) == [0, 1, 2]
    assert {t.result["pack"]["size"] for t in members} == {3}
    assert all(len(t.metrics) == t.result["epochs_run"] for t in members)


def test_cancel_stops_queued_trials_and_resubmit_resumes(url):
    store = open_store(url)
    spec = parse_spec(_spec(seeds=4, name="cancel"))
    with LocalExecutor(url, workers=1, train_fn=one_by_one(crash_on_seed_1)) as ex:
        # cancel before anything is submitted: every trial ends CANCELLED without running
        result = submit_experiment(spec, store)
        assert ex.cancel(result.experiment.id) == 4
    counts = store.counts_by_state(result.experiment.id)
    assert counts["CANCELLED"] == 4
    with LocalExecutor(url, workers=1, train_fn=one_by_one(report_threads)) as ex:
        again = submit_experiment(spec, store, ex)
        assert sorted(again.requeued_trial_ids) == sorted(again.trial_ids)
        assert again.new_trial_ids == []
        assert ex.wait(timeout=120)
    assert store.counts_by_state(result.experiment.id)["COMPLETE"] == 4, [
        (t.state, t.error) for t in store.list_trials(result.experiment.id)
    ]
    assert not store.get_experiment(result.experiment.id).cancel_requested


def record_pid_slowly(config, on_epoch=None):
    import time

    time.sleep(0.05)
    return _ok(pid=os.getpid())


def test_workers_keep_to_the_graphs_they_compiled(url):
    spec = parse_spec(
        {
            **_spec(seeds=4, name="affinity"),
            "model": {"hidden_layers": 1, "width": 8, "activation": {"grid": ["relu", "tanh"]}},
        }
    )
    store = open_store(url)
    with LocalExecutor(url, workers=2, train_fn=one_by_one(record_pid_slowly)) as ex:
        assert ex.wait_ready(timeout=120)
        result = submit_experiment(spec, store, ex)
        assert ex.wait(timeout=120)
    pairs = {
        (t.result["environment"]["pid"], t.config["model"]["activation"])
        for t in store.list_trials(result.experiment.id)
    }
    # in queue order both workers would compile both graphs (4 pairs); with affinity each
    # worker stays on its graph (2 pairs; 3 if one worker ran ahead and helped the other)
    assert len(pairs) <= 3, pairs


def test_a_free_process_takes_its_own_graph_then_an_untaken_one_then_the_oldest():
    queue = PackQueue()
    for ids, key in ((["a"], "k1"), (["b"], "k2"), (["c"], "k3"), (["d", "e"], "k2")):
        queue.append(QueuedPack(ids, key))
    # a process that compiled k2 keeps to it, in queue order
    assert queue.take({"k2"}, {"k1"}).trial_ids == ["b"]
    # a fresh process skips the graph another one has built
    assert queue.take(set(), {"k1", "k2"}).trial_ids == ["c"]
    # every graph is taken elsewhere: the oldest
    assert queue.take(set(), {"k1", "k2"}).trial_ids == ["a"]
    queue.put_first(QueuedPack(["z"], None))
    assert queue.drop({"d", "y"}) == 1
    assert [(p.trial_ids, p.compile_key) for p in queue] == [(["z"], None), (["e"], "k2")]
    assert queue.trial_count() == 2
    # a pack without a key ends the search for a better-suited one
    assert queue.take({"k2"}, set()).trial_ids == ["z"]
    assert queue.clear() == 1 and len(queue) == 0


def test_a_rerun_recovers_trials_whose_worker_stopped(url, monkeypatch):
    """What `dnnframe run` does before it submits (dnnframe.recovery.recover_for_run) puts
    back a trial whose owner process on this host is gone, and one whose heartbeat went
    stale; the submit that follows hands them on. The submit alone recovers nothing."""
    import socket

    from dnnframe.recovery import recover_for_run

    store = open_store(url)
    spec = parse_spec(_spec(seeds=3, name="recover"))
    first = submit_experiment(spec, store)
    orphan, stale, alive_elsewhere = first.trial_ids
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid now names no process
    assert store.claim_trial(orphan, f"{socket.gethostname()}:{gone.pid}") is not None
    assert store.claim_trial(stale, "another-host:1") is not None
    assert store.claim_trial(alive_elsewhere, "another-host:2") is not None
    store.heartbeat(alive_elsewhere, "another-host:2")
    monkeypatch.setenv("DNNFRAME_HEARTBEAT_TIMEOUT", "0.000001")
    assert submit_experiment(spec, store).submitted_trial_ids == []
    monkeypatch.setenv("DNNFRAME_HEARTBEAT_TIMEOUT", "3600")
    assert recover_for_run(store, spec) == [orphan]  # another host: wait for the timeout
    assert store.get_trial(orphan).state is TrialState.QUEUED
    assert submit_experiment(spec, store).submitted_trial_ids == [orphan]
    monkeypatch.setenv("DNNFRAME_HEARTBEAT_TIMEOUT", "0.000001")
    assert sorted(recover_for_run(store, spec)) == sorted([stale, alive_elsewhere])
    assert {store.get_trial(t).attempts for t in (orphan, stale, alive_elsewhere)} == {1}


def _queued(doc: dict) -> tuple[list[str], dict[str, dict]]:
    pairs = [(tid, cfg.model_dump(mode="json")) for tid, cfg in expand_with_ids(parse_spec(doc))]
    return [tid for tid, _ in pairs], dict(pairs)


def test_packs_group_trials_of_one_graph_in_near_equal_sizes():
    ids, configs = _queued(_spec(seeds=5, name="packs"))
    assert make_packs(ids, configs, 2, workers=1) == [ids[0:2], ids[2:4], ids[4:5]]
    assert make_packs(ids, configs, 1, workers=1) == [[tid] for tid in ids]  # one trial each
    assert make_packs(ids, configs, 3, workers=1) == [ids[0:3], ids[3:5]]


def test_a_split_group_keeps_each_seeds_trials_in_one_pack():
    """Trials of one seed share their shuffles and initial draws: split into packs, a graph's
    trials go by seed (in submission order within a seed), not by the order of the grid."""
    ids, configs = _queued(
        {
            **_spec(seeds=4, name="by-seed"),
            "training": {
                "max_epochs": 1,
                "batch_size": 32,
                "learning_rate": {"grid": [0.01, 0.1, 0.3]},
            },
        }
    )
    assert [configs[t]["seed"] for t in ids[:4]] != [0] * 4  # the grid comes seed by seed
    packs = make_packs(ids, configs, 6, workers=1)
    assert [sorted({configs[t]["seed"] for t in p}) for p in packs] == [[0, 1], [2, 3]]
    assert sorted(t for p in packs for t in p) == sorted(ids)
    for p in packs:  # within a seed, the submission order
        for seed in {configs[t]["seed"] for t in p}:
            mine = [t for t in p if configs[t]["seed"] == seed]
            assert mine == [t for t in ids if t in mine]


def test_automatic_packs_are_never_fewer_than_workers_nor_mix_graphs():
    ids, configs = _queued(_spec(seeds=10, name="auto"))
    assert [len(p) for p in make_packs(ids, configs, None, workers=4)] == [2, 2, 2, 2, 2]
    assert [len(p) for p in make_packs(ids, configs, None, workers=1)] == [10]
    assert [len(p) for p in make_packs(ids[:3], configs, None, workers=4)] == [1, 1, 1]
    depth_ids, depth_configs = _queued(
        {**_spec(seeds=2, name="depths"), "model": {"hidden_layers": {"grid": [1, 2]}, "width": 8}}
    )
    packs = make_packs(depth_ids, depth_configs, None, workers=1)
    assert len(packs) == 2
    assert [{depth_configs[t]["model"]["hidden_layers"] for t in p} for p in packs] == [{1}, {2}]
    # several workers: about two packs each, so a costlier graph does not leave one idle
    ids3, configs3 = _queued(
        {
            **_spec(seeds=8, name="balance"),
            "model": {"hidden_layers": {"grid": [1, 2, 3]}, "width": 8},
        }
    )
    assert [len(p) for p in make_packs(ids3, configs3, None, workers=2)] == [4] * 6


def test_automatic_pack_size_respects_the_memory_budget():
    ids, configs = _queued(
        {**_spec(seeds=4, name="wide"), "model": {"hidden_layers": 8, "width": 1024}}
    )
    # one member of this shape needs more than the whole budget: one trial per pack
    assert [len(p) for p in make_packs(ids, configs, None, workers=1)] == [1, 1, 1, 1]


def test_pack_size_comes_from_the_command_line_then_the_spec_then_the_environment(monkeypatch):
    spec = parse_spec(_spec(seeds=2, name="size"))
    monkeypatch.delenv("DNNFRAME_PACK_SIZE", raising=False)
    assert resolve_pack_size(spec) is None
    monkeypatch.setenv("DNNFRAME_PACK_SIZE", "4")
    assert resolve_pack_size(spec) == 4
    assert resolve_pack_size(spec, 2) == 2


def test_local_executor_runs_packs_and_counts_every_member(url):
    store = open_store(url)
    with LocalExecutor(url, workers=2, train_fn=one_by_one(record_pid_slowly)) as ex:
        result = submit_experiment(
            parse_spec(_spec(seeds=6, name="packed")), store, ex, pack_size=3
        )
        assert ex.wait(timeout=120)
        stats = ex.stats
    assert [len(p) for p in result.packs] == [3, 3]
    trials = {t.id: t for t in store.list_trials(result.experiment.id)}
    assert all(t.state is TrialState.COMPLETE and t.attempts == 1 for t in trials.values())
    for pack in result.packs:  # a pack runs in one worker process
        assert len({trials[tid].result["environment"]["pid"] for tid in pack}) == 1
    assert stats.finished == 6 and stats.states == {"COMPLETE": 6}


def test_each_worker_keeps_its_entry_in_the_worker_list_up_to_date(url):
    """A worker registers when it starts, with each pack and once it stops: the list ends
    with every local worker stopped, idle, and their trials counted once."""
    store = open_store(url)
    with LocalExecutor(url, workers=2, train_fn=one_by_one(record_pid_slowly)) as ex:
        submit_experiment(parse_spec(_spec(seeds=6, name="listed")), store, ex, pack_size=2)
        assert ex.wait(timeout=120)
    workers = store.list_workers()
    assert len(workers) == 2
    assert sum(w.trials_done for w in workers) == 6
    assert all(
        w.current_trial is None and w.info == {"executor": "local", "stopped": True} and w.pid
        for w in workers
    ), workers


def test_wait_any_returns_when_one_trial_ends_while_others_run(url, tmp_path, monkeypatch):
    release = tmp_path / "release"
    monkeypatch.setenv("HOLD_FILE", str(release))
    store = open_store(url)
    with LocalExecutor(url, workers=2, train_fn=one_by_one(hold_seed_0)) as ex:
        result = submit_experiment(parse_spec(_spec(seeds=2, name="any")), store, ex, pack_size=1)
        assert ex.wait_any(0, timeout=60) == 1  # seed 1 ended; seed 0 is held
        # the process that trained seed 1 may be the one to take seed 0 next, so seed 0 can
        # still be QUEUED at this moment; it must be taken and held, never ended
        deadline = time.monotonic() + 60
        while True:
            states = {t.config["seed"]: t.state for t in store.list_trials(result.experiment.id)}
            assert states[0] in (TrialState.QUEUED, TrialState.RUNNING), states
            if states[0] is TrialState.RUNNING or time.monotonic() > deadline:
                break
            ex.wait_any(1, timeout=0.2)
        assert states == {0: TrialState.RUNNING, 1: TrialState.COMPLETE}
        # the stats name the trial a process is training
        assert ex.stats.running == [
            t.id for t in store.list_trials(result.experiment.id) if t.config["seed"] == 0
        ]
        assert ex.wait_any(1, timeout=0.05) == 1  # nothing else ended: the timeout returns
        release.touch()
        assert ex.wait_any(1, timeout=60) == 2
        assert {t.state for t in store.list_trials(result.experiment.id)} == {TrialState.COMPLETE}


def test_the_worker_list_tells_live_workers_from_dead_ones(url):
    """Workers of a pool are alive while it runs; one killed with SIGKILL and all of them
    after a clean shutdown are not, and /api/v1/workers says so."""
    from dashboard import create_app
    from dashboard.worker_status import is_alive

    ex = LocalExecutor(url, workers=2, train_fn=one_by_one(crash_on_seed_1))
    store = open_store(url)
    try:
        assert ex.wait_ready(timeout=120)
        first = store.list_workers()
        assert len(first) == 2 and all(is_alive(store, w) for w in first)
        victim = first[0]
        os.kill(victim.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while ex.stats.worker_restarts < 1 or not ex.wait_ready(timeout=1):
            assert time.monotonic() < deadline, "the killed worker was not replaced"
        status = {w.name: is_alive(store, w) for w in store.list_workers()}
        assert len(status) == 3 and status[victim.name] is False
        assert sum(status.values()) == 2, status
    finally:
        ex.shutdown()
    assert not any(is_alive(store, w) for w in store.list_workers()), "after shutdown"

    app = create_app({"TESTING": True, "STORE_URL": url, "EXECUTOR": None})
    try:
        rows = app.test_client().get("/api/v1/workers").json["workers"]
    finally:
        app.extensions["dnnframe"].shutdown()
    assert len(rows) == 3 and not any(r["alive"] for r in rows)


def test_an_idle_celery_worker_on_another_host_is_alive_while_its_node_lists_it(url, monkeypatch):
    from dashboard.worker_status import is_alive
    from dnnframe.executors.liveness import NODE_ROLE
    from dnnframe.store import base_trials

    store = open_store(url)
    # pool processes that wrote once, long ago (the store's clock set back for their
    # writes), and have trained nothing since
    real_time = time.time
    with monkeypatch.context() as m:
        m.setattr(base_trials, "clock", lambda: real_time() - 10_000)
        store.register_worker("celery@far:7", host="far-away", pid=7)
        store.register_worker("celery@far:8", host="far-away", pid=8)
    (seven, eight) = sorted(store.list_workers(), key=lambda w: w.name)
    later = real_time() + 10_000
    assert not is_alive(store, seven) and not is_alive(store, eight)
    # its node (the worker's main process) beats, listing its pool processes
    store.register_worker(
        "celery@far",
        host="far-away",
        pid=1,
        info={"role": NODE_ROLE, "queues": ["default"], "concurrency": 1, "pids": [7]},
    )
    assert is_alive(store, seven)
    assert not is_alive(store, eight), "not one of the node's processes"
    assert not is_alive(store, seven, now=later), "the node's beat is stale too"
    store.close()


def test_a_celery_node_and_its_processes_are_dead_once_the_node_is_silent_past_its_timeout(
    url, monkeypatch
):
    """Processes of a node on another host are judged by the node's beat, by the rule the
    reaper releases their trials by: dead once the node is silent for the node timeout,
    though their own writes are far younger than the heartbeat timeout; a process the
    node's next beat does not list (killed alone) is dead from that beat on."""
    from dashboard.worker_status import is_alive
    from dnnframe.executors.liveness import NODE_ROLE
    from dnnframe.store import base_trials

    monkeypatch.setenv("DNNFRAME_HEARTBEAT_TIMEOUT", "300")  # node timeout 30 s
    store = open_store(url)
    clock = [1_000_000.0]
    monkeypatch.setattr(base_trials, "clock", lambda: clock[0])  # the stores' one clock

    def beat(pids: list[int]) -> None:
        store.register_worker(
            "celery@far",
            host="far-away",
            pid=1,
            info={"role": NODE_ROLE, "queues": ["default"], "concurrency": 2, "pids": pids},
        )

    beat([7])
    clock[0] += 1
    store.register_worker("celery@far:7", host="far-away", pid=7)
    store.register_worker("celery@far:9", host="far-away", pid=9)  # started after the beat
    workers = {w.name: w for w in store.list_workers()}
    node, seven, nine = workers["celery@far"], workers["celery@far:7"], workers["celery@far:9"]
    assert all(is_alive(store, w, now=1_000_029.0) for w in (node, seven, nine))
    assert not any(is_alive(store, w, now=1_000_030.5) for w in (node, seven, nine))
    clock[0] += 4
    beat([7])  # 9 was killed alone: the node's next beat does not list it
    workers = {w.name: w for w in store.list_workers()}
    assert is_alive(store, workers["celery@far:7"], now=clock[0])
    assert not is_alive(store, workers["celery@far:9"], now=clock[0])
    store.close()


def test_a_worker_on_another_host_is_alive_while_it_writes_or_its_trial_beats(url):
    from dashboard.worker_status import is_alive

    store = open_store(url)
    trial = submit_experiment(parse_spec(_spec(1)), store).trial_ids[0]
    store.register_worker("far:7", host="far-away", pid=7, current_trial=trial)
    (far,) = store.list_workers()
    later = far.last_seen + 10_000  # long past the heartbeat timeout
    assert is_alive(store, far) and not is_alive(store, far, now=later)
    assert store.claim_trial(trial, "far:7") is not None
    assert store.heartbeat(trial, "far:7")
    beat = store.get_trial(trial).heartbeat_at
    assert beat > far.last_seen
    # a moment when the worker's own record is just too old and its trial's beat is not
    timeout = settings.get().heartbeat_timeout
    between = timeout + (far.last_seen + beat) / 2
    assert is_alive(store, far, now=between) and not is_alive(store, far, now=later)
    store.close()
