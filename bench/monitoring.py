"""What monitoring costs: one-trial messages through a real Celery worker with its task
events on (dnnframe's default: received, started, succeeded per message, which Flower
reads) and off (``disable_events`` sent to this worker only), in alternating rounds on the
same worker and queue, side by side.

The no-op train function has no epochs, so this is the per-message cost of the events and
of the task's report; progress events (at most one a second per task) come on top only for
tasks that train longer than that.

Usage::

    python bench/monitoring.py                 # 300 trials per round, 3 rounds each
    python bench/monitoring.py --trials 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.throughput import BROKER_URL, _celery_worker, tiny_spec  # noqa: E402
from dnnframe.executors import CeleryExecutor  # noqa: E402
from dnnframe.spec import parse_spec  # noqa: E402
from dnnframe.store import open_store  # noqa: E402
from dnnframe.submit import submit_experiment  # noqa: E402


def _round(store_url: str, queue: str, n: int, name: str) -> float:
    store = open_store(store_url)
    ex = CeleryExecutor(BROKER_URL, store_url, queue=queue)
    t = time.perf_counter()
    submit_experiment(parse_spec(tiny_spec(n, name)), store, ex, pack_size=1)
    if not ex.wait(timeout=600):
        raise SystemExit(f"round {name} did not finish in 600 s")
    seconds = time.perf_counter() - t
    ex.shutdown(wait=False)
    store.close()
    return n / seconds


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=300, help="one-trial messages per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each setting")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url, log = f"sqlite:///{Path(tmp) / 'store.db'}", Path(tmp) / "worker.log"
        with _celery_worker(url, 1, log, noop=True) as queue:
            node = re.search(r"(bench-\w+@\S+) ready\.", log.read_text()).group(1)
            control = CeleryExecutor(BROKER_URL, url, queue=queue).app.control
            _round(url, queue, args.trials, "warm-up")  # imports, first connections
            rates: dict[str, list[float]] = {"on": [], "off": []}
            for r in range(args.rounds):
                for setting in ("on", "off"):
                    command = "enable_events" if setting == "on" else "disable_events"
                    replies = control.broadcast(command, destination=[node], reply=True, timeout=5)
                    if not replies:
                        raise SystemExit(f"{node} did not answer {command}")
                    rates[setting].append(_round(url, queue, args.trials, f"{setting}-{r}"))
    on, off = (statistics.median(v) for v in (rates["on"], rates["off"]))
    print(
        f"# one-trial messages, no-op training, 1 worker (concurrency 1), {args.trials} per "
        f"round, {args.rounds} rounds each, alternating"
    )
    print(
        f"task events on  (default): median {on:8.1f} trials/s  rounds {[round(x, 1) for x in rates['on']]}"
    )
    print(
        f"task events off          : median {off:8.1f} trials/s  rounds {[round(x, 1) for x in rates['off']]}"
    )
    print(f"on / off = {on / off:.3f}")


if __name__ == "__main__":
    main()
