"""A PostgreSQL cluster a test owns (Debian's server binaries, run as the ``postgres``
user when the test runs as root): its own data directory and free port, listening on the
addresses the test names, trust auth from the subnets it names. The machine's shared
server is never touched; this one can be restarted mid-sweep and is deleted afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg


def server_bin() -> Path | None:
    """The newest installed PostgreSQL server's bin folder, or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


class PgCluster:
    """``initdb`` + ``pg_ctl start`` on ``port``, listening on 127.0.0.1 and ``addresses``,
    trusting connections from 127.0.0.1 and ``trusted`` (CIDRs). Use as a context manager:
    it is stopped and its files deleted on exit."""

    def __init__(
        self, port: int, addresses: list[str], trusted: list[str], parent: Path | None = None
    ):
        bin_dir = server_bin()
        if bin_dir is None:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
        self.port, self._bin = port, bin_dir
        self._as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        # ``parent``: a folder of the caller's choice (a small filesystem it fills up)
        self.home = Path(tempfile.mkdtemp(prefix="dnnframe-netns-pg-", dir=parent))
        if self._as_owner:
            shutil.chown(self.home, "postgres", "postgres")
        self.data, self.log = self.home / "data", self.home / "server.log"
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust")
        # In the configuration files, not on pg_ctl's command line: a restart keeps them.
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"listen_addresses = '{','.join(['127.0.0.1', *addresses])}'\n"
                f"port = {port}\nunix_socket_directories = '{self.home}'\n"
            )
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.writelines(f"host all all {cidr} trust\n" for cidr in trusted)

    def _run(self, tool: str, *args: str, timeout: float = 120) -> None:
        proc = subprocess.run(
            [*self._as_owner, str(self._bin / tool), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            log = self.log.read_text()[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {proc.stderr}\n{log}")

    def ctl(self, *args: str) -> None:
        """``pg_ctl ARGS`` on this cluster, waiting (60 s at most) for it to finish."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", *args)

    def start(self) -> None:
        self.ctl("start")

    def running(self) -> bool:
        """Whether the server runs (``pg_ctl status``)."""
        return (
            subprocess.run(
                [*self._as_owner, str(self._bin / "pg_ctl"), "-D", str(self.data), "status"],
                capture_output=True,
                timeout=30,
            ).returncode
            == 0
        )

    def restart(self) -> None:
        """A fast restart (``pg_ctl restart -m fast``): every session is ended."""
        self.ctl("-m", "fast", "restart")

    def url(self, database: str = "postgres", address: str = "127.0.0.1") -> str:
        return f"postgresql://postgres@{address}:{self.port}/{database}"

    def create_database(self, name: str) -> None:
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def clients(self, database: str, since: float = 0.0) -> set[str]:
        """Addresses of the store sessions (dnnframe's) on ``database`` opened after
        ``since`` (wall clock)."""
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            rows = conn.execute(
                "SELECT DISTINCT host(client_addr) FROM pg_stat_activity WHERE datname = %s "
                "AND application_name = 'dnnframe' AND backend_start > to_timestamp(%s)",
                (database, since),
            ).fetchall()
        return {addr for (addr,) in rows if addr is not None}

    def __enter__(self) -> PgCluster:
        try:
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(
            [
                *self._as_owner,
                str(self._bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            timeout=90,
        )
        shutil.rmtree(self.home, ignore_errors=True)
