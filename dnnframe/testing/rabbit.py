"""A throw-away RabbitMQ node (Debian's server scripts): its own name, free ports and data
directory, so a test or the chaos run can stop and restart a broker without touching the
machine's shared one."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

# Debian installs the real scripts here; /usr/sbin/rabbitmq-server is a wrapper that
# switches to the rabbitmq user (and so could not read a temp folder of ours).
RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")


def free_ports(n: int) -> list[int]:
    """``n`` distinct local TCP ports nothing listens on right now."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def rabbitmq_missing() -> str | None:
    """Why no node can be started here (None when one can)."""
    server = RABBITMQ_BIN / "rabbitmq-server"
    if not server.exists():
        return (
            f"RabbitMQ is not installed ({server} is missing); .ci/run installs the "
            "Debian package rabbitmq-server"
        )
    return None


@dataclass
class RabbitNode:
    """A RabbitMQ node of one test or run only."""

    name: str
    url: str
    env: dict[str, str]
    root: Path
    port: int = 0

    def ctl(self, *args: str, timeout: float = 120) -> str:
        """Run ``rabbitmqctl -n NODE ARGS`` against this node only; raises on an error."""
        proc = subprocess.run(
            [str(RABBITMQ_BIN / "rabbitmqctl"), "-n", self.name, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)} on {self.name}: {proc.stderr}")
        return proc.stdout

    def stop_app(self) -> None:
        """Stop the broker application (connections drop, the node stays up)."""
        self.ctl("stop_app")

    def start_app(self) -> None:
        """Start the broker application again and wait until it takes connections."""
        self.ctl("start_app")
        self.ctl("await_startup", "--timeout", "90")

    def stop(self) -> None:
        """Stop the whole node (its data directory stays with ``root``)."""
        subprocess.run(
            [str(RABBITMQ_BIN / "rabbitmqctl"), "-n", self.name, "stop", str(self.root / "pid")],
            env=self.env,
            capture_output=True,
            timeout=60,
        )


def erlang_home(root: Path) -> Path:
    """A HOME for a node and the CLI that talks to it, holding their Erlang cookie.

    Written before either starts: left to themselves, the server and a ``rabbitmqctl`` started
    beside it may each create a cookie there, and a CLI that read its own is refused by the
    node ("Invalid challenge reply") until its wait times out.
    """
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    cookie = home / ".erlang.cookie"
    if not cookie.exists():  # a node booted here before keeps its cookie
        cookie.write_text(uuid.uuid4().hex.upper())
        cookie.chmod(0o400)  # Erlang refuses a cookie file others can read
    return home


def start_rabbit_node(root: Path) -> RabbitNode:
    """Boot a node on free ports with its files under ``root`` and wait until it is up;
    raises RuntimeError (with its logs) when it does not boot. Call ``stop()`` after."""
    amqp, dist = free_ports(2)
    (root / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = {amqp}\nloopback_users.guest = true\n"
    )
    (root / "enabled_plugins").write_text("[].\n")  # no management plugin: boots faster
    name = f"dnnframe-test-{uuid.uuid4().hex[:8]}@localhost"
    env = {
        **os.environ,
        "HOME": str(erlang_home(root)),
        "RABBITMQ_NODENAME": name,
        "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq.conf"),
        "RABBITMQ_MNESIA_BASE": str(root / "mnesia"),
        "RABBITMQ_LOG_BASE": str(root / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
        "RABBITMQ_DIST_PORT": str(dist),
        "RABBITMQ_PID_FILE": str(root / "pid"),
    }
    subprocess.run(
        [str(RABBITMQ_BIN / "rabbitmq-server"), "-detached"], env=env, check=True, timeout=60
    )
    node = RabbitNode(name, f"amqp://guest:guest@127.0.0.1:{amqp}//", env, root, amqp)
    waited = subprocess.run(
        [
            str(RABBITMQ_BIN / "rabbitmqctl"),
            "-n",
            name,
            "wait",
            str(root / "pid"),
            "--timeout",
            "90",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if waited.returncode != 0:
        node.stop()
        logs = "".join(p.read_text()[-3000:] for p in (root / "log").glob("*.log"))
        raise RuntimeError(f"the RabbitMQ node did not boot:\n{waited.stderr}\n{logs}")
    return node
