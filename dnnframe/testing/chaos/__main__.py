"""``python -m dnnframe.testing.chaos --minutes N --seed S``: a seeded chaos run against a
deployment of real parts on this machine (needs RabbitMQ's server, and PostgreSQL's unless
the store is SQLite; root for network-namespace hosts). Prints the fault schedule first (the same seed
replays it) and a report last; exits 1 when an invariant was violated."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .deploy import SERVER_KINDS, STORES
from .run import chaos_run
from .schedule import DEFAULT_KINDS, KINDS

HOOK = "dnnframe.testing.hooks:rate_train"


def settings_for(train: str, heartbeat_s: float, lease_s: float) -> dict[str, str]:
    """The DNNFRAME_* settings of every process: short timeouts so recovery is quick, and
    with ``train="hook"`` trials that sleep instead of training (three 0.5 s epochs)."""
    env = {
        "DNNFRAME_HEARTBEAT_TIMEOUT": str(heartbeat_s),
        "DNNFRAME_DRIVER_LEASE_S": str(lease_s),
        "DNNFRAME_WORKERS": "2",
    }
    if train == "hook":
        env.update(
            {
                "DNNFRAME_TRAIN_FN": HOOK,
                "DNNFRAME_HOOK_EPOCHS": "3",
                "DNNFRAME_HOOK_EPOCH_SECONDS": "0.5",
            }
        )
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dnnframe.testing.chaos", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--minutes", type=float, default=3.0, help="how long faults go on")
    parser.add_argument("--seed", type=int, default=0, help="seeds the faults and the workload")
    parser.add_argument(
        "--settle",
        type=float,
        default=120.0,
        help="seconds after the last fault within which every trial must end",
    )
    parser.add_argument(
        "--train",
        choices=("engine", "hook"),
        default="engine",
        help="engine: real PyTensor training on iris; hook: sleeping trials",
    )
    parser.add_argument("--heartbeat-timeout", type=float, default=4.0)
    parser.add_argument("--driver-lease", type=float, default=4.0)
    parser.add_argument(
        "--kinds",
        default=None,
        help=f"fault kinds, comma-separated, of {', '.join(KINDS)} (default "
        "all but disk_full, which puts the store on a small tmpfs; with "
        f"--store sqlite, also without {', '.join(SERVER_KINDS)})",
    )
    parser.add_argument(
        "--store",
        choices=STORES,
        default="postgresql",
        help="a PostgreSQL cluster of its own, or one SQLite file",
    )
    parser.add_argument(
        "--no-netns",
        action="store_true",
        help="hosts as plain processes even where namespaces can be made",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="logs and data (default a new temporary folder, kept)",
    )
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error(f"--minutes must be positive, got {args.minutes}")
    if args.kinds is None:
        kinds = tuple(k for k in DEFAULT_KINDS if args.store != "sqlite" or k not in SERVER_KINDS)
    else:
        kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"--kinds: unknown {unknown}; known: {', '.join(KINDS)}")
    if args.store == "sqlite" and set(kinds) & set(SERVER_KINDS):
        parser.error(
            f"--kinds: {sorted(set(kinds) & set(SERVER_KINDS))} need a store "
            "server; a SQLite store has none"
        )
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="dnnframe-chaos-"))
    print(f"logs in {workdir}", flush=True)
    report = chaos_run(
        workdir,
        args.seed,
        args.minutes * 60,
        settings_for(args.train, args.heartbeat_timeout, args.driver_lease),
        settle_s=args.settle,
        kinds=kinds,
        use_netns=not args.no_netns,
        store=args.store,
    )
    print(report.text(), flush=True)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
