"""What ``POST /api/v1/experiments`` costs without a broker: store round trips and wall time.

The dashboard app runs in-process (Flask's test client) as ``dnnframe serve`` configures it
(``LOCAL_POOL: "service"``, no broker: the trials are handed to the driver service's pool
through the store, so no pool starts here). Its store is a real SQLite file wrapped in a
counting proxy: every call of a store method (each one a query or a transaction) counts
as one round trip, by method name. The store also holds another experiment with
``--running`` trials (default 4) RUNNING under a live process of this host and as many
QUEUED, as a server at work would.

Measured:

* round trips of one POST of a small spec (6 trials), new, and of the same spec again;
* the wall time (median of ``--repeat``) and round trips of one POST of a
  ``--trials``-trial sweep, each on a fresh store;
* what the driver service then costs to take that sweep's trials from the store and pack
  them for its pool (``take_handed``): wall time, round trips, and how many of them read
  configurations (``get_trials`` with the config field) or an experiment's spec.

With ``--base REF`` the same measurement also runs on the code of ``REF`` (unpacked with
``git archive`` into a temporary folder, imported first through ``PYTHONPATH``) and the
numbers are printed side by side.

    .venv/bin/python bench/submit_path.py [--trials 1000] [--repeat 3] [--running 4]
        [--base main]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

from checkouts import base_tree  # noqa: E402  (bench/, the script's own folder)


class CountingStore:
    """A store whose method calls are counted by name (each is one round trip). A copy of
    :class:`dnnframe.testing.counting.CountingStore`: a base checkout may not have that."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value) or name.startswith("_") or name in ("close",):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return value(*args, **kwargs)

        return counted


def _spec(name: str, seeds: int, width: int = 8) -> dict:
    return {
        "name": name,
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": 1, "width": width},
        "training": {"max_epochs": 1},
        "search": {"seeds": seeds},
    }


def _app(folder: Path, running: int) -> tuple[Any, CountingStore]:
    from dashboard import create_app
    from dnnframe.spec import parse_spec
    from dnnframe.store import open_store
    from dnnframe.submit import submit_experiment

    url = f"sqlite:///{folder / 'store.db'}"
    app = create_app(
        {
            "TESTING": True,
            "STORE_URL": url,
            "LOCAL_POOL": "service",
            "BROKER_URL": None,
            "WORKERS": 2,
        }
    )
    real = open_store(url)
    busy = submit_experiment(parse_spec(_spec("busy", 2 * running, width=16)), real)  # stored
    for tid in busy.trial_ids[:running]:  # training in a live process of this host
        real.claim_trial(tid, f"{os.uname().nodename}:{os.getppid()}")
    counting = CountingStore(real)
    app.extensions["dnnframe"]._store = counting
    return app, counting


class _Pool:
    """A pool that records what it is given (the driver service's, without processes)."""

    parallelism = 2

    def __init__(self) -> None:
        self.trials = 0

    def submit(self, packs: Any, compile_keys: Any = None) -> None:
        self.trials += sum(len(p) for p in packs)


def _take(store: CountingStore) -> dict:
    """The driver service's take of everything handed: seconds, calls, config reads."""
    from dnnframe.executors.handoff import take_handed

    reads = {"config_reads": 0}
    get_trials = store.get_trials

    def counted(ids: Any, *args: Any, **kwargs: Any) -> Any:
        fields = kwargs.get("fields", args[0] if args else None)
        if fields is None or "config" in fields:
            reads["config_reads"] += 1
        return get_trials(ids, *args, **kwargs)

    store.calls.clear()
    store.get_trials = counted  # type: ignore[method-assign]
    pool = _Pool()
    started = time.perf_counter()
    take_handed(store, pool)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    del store.get_trials
    return {"seconds": seconds, "calls": dict(store.calls), "trials": pool.trials, **reads}


def _post(client: Any, doc: dict, expect: int) -> None:
    response = client.post("/api/v1/experiments", json=doc)
    assert response.status_code == expect, (response.status_code, response.get_data(True))


def measure(trials: int, repeat: int, running: int) -> dict:
    """The numbers of the code this process imports (see the module docstring)."""
    import dnnframe

    out: dict[str, Any] = {"code": str(Path(dnnframe.__file__).resolve().parents[1])}
    with tempfile.TemporaryDirectory(prefix="dnnframe-submit-") as d:
        app, store = _app(Path(d), running)
        client = app.test_client()
        _post(client, _spec("warm-up", 2, width=4), 201)  # imports, first queries
        for label, expect in (("small_new", 201), ("small_again", 200)):
            store.calls.clear()
            _post(client, _spec("small", 6), expect)
            out[label] = dict(store.calls)
        app.extensions["dnnframe"].shutdown()
    walls, calls, takes = [], {}, []
    for i in range(repeat):
        with tempfile.TemporaryDirectory(prefix="dnnframe-submit-") as d:
            app, store = _app(Path(d), running)
            client = app.test_client()
            _post(client, _spec("warm-up", 2, width=4), 201)
            store.calls.clear()
            started = time.perf_counter()
            _post(client, _spec(f"big-{i}", trials), 201)
            walls.append(time.perf_counter() - started)
            calls = dict(store.calls)
            takes.append(_take(store))
            app.extensions["dnnframe"].shutdown()
    out["big"] = {
        "seconds": statistics.median(walls),
        "min_seconds": min(walls),
        "all_seconds": walls,
        "calls": calls,
    }
    out["take"] = {**takes[-1], "seconds": statistics.median(t["seconds"] for t in takes)}
    return out


def _run(tree: Path, args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DNNFRAME_BROKER_URL"}
    env["PYTHONPATH"] = str(tree)
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--measure",
            "--trials",
            str(args.trials),
            "--repeat",
            str(args.repeat),
            "--running",
            str(args.running),
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"measuring {tree} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["code"]) != tree.resolve():
        raise SystemExit(f"measured the code in {result['code']}, not {tree}")
    return result


def _calls(calls: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(calls.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--running", type=int, default=4, help="trials RUNNING in the store (another experiment's)"
    )
    ap.add_argument("--base", help="also measure this commit (e.g. main) side by side")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.trials, args.repeat, args.running)))
        return
    with tempfile.TemporaryDirectory(prefix="dnnframe-submit-base-") as d:
        results = {}
        if args.base:
            results[f"base ({args.base})"] = _run(base_tree(args.base, Path(d) / "tree"), args)
        results["this tree"] = _run(REPO, args)
    print(
        f"POST /api/v1/experiments, no broker (LOCAL_POOL service), SQLite store, "
        f"{args.running} trials RUNNING\n"
    )
    print(f"{'':34}" + "".join(f"{label:>22}" for label in results))
    rows = [
        ("round trips, 6 trials, new", lambda r: sum(r["small_new"].values())),
        ("round trips, 6 trials, again", lambda r: sum(r["small_again"].values())),
        (f"round trips, {args.trials} trials", lambda r: sum(r["big"]["calls"].values())),
        (f"wall s, {args.trials} trials (median)", lambda r: f"{r['big']['seconds']:.3f}"),
        (f"wall s, {args.trials} trials (min)", lambda r: f"{r['big']['min_seconds']:.3f}"),
        ("service's take: trials packed", lambda r: r["take"]["trials"]),
        ("service's take: wall s (median)", lambda r: f"{r['take']['seconds']:.3f}"),
        ("service's take: round trips", lambda r: sum(r["take"]["calls"].values())),
        ("service's take: config reads", lambda r: r["take"]["config_reads"]),
    ]
    for label, value in rows:
        print(f"{label:34}" + "".join(f"{value(r):>22}" for r in results.values()))
    for label, r in results.items():
        print(
            f"\n{label}:\n  6 new: {_calls(r['small_new'])}\n  6 again: "
            f"{_calls(r['small_again'])}\n  {args.trials}: {_calls(r['big']['calls'])}"
            f"\n  {args.trials} wall s: {', '.join(f'{s:.3f}' for s in r['big']['all_seconds'])}"
            f"\n  service's take: {_calls(r['take']['calls'])}"
        )


if __name__ == "__main__":
    main()
