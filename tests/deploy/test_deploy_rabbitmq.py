"""deploy/rabbitmq/: a real RabbitMQ node boots with the files compose mounts and uses them.

The container image cannot run here, but this machine's RabbitMQ (the one .ci/run
installs) can start a second, throw-away node on free ports with the same layout as the
image: our rabbitmq.conf in a conf.d directory after a file that only moves the ports, and
our enabled_plugins file. The node then reports the settings it actually runs with.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from deploy_support import REPO

from dnnframe.testing.rabbit import RABBITMQ_BIN, erlang_home, free_ports

DEPLOY = REPO / "deploy" / "rabbitmq"
SERVER_BIN = RABBITMQ_BIN


@pytest.fixture(scope="module")
def scratch_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    """A RabbitMQ node started from deploy/rabbitmq's files; yields (node name, env)."""
    server = SERVER_BIN / "rabbitmq-server"
    if not server.exists():
        pytest.skip(
            f"RabbitMQ is not installed ({server} is missing); .ci/run installs the "
            "Debian package rabbitmq-server"
        )
    root = tmp_path_factory.mktemp("rabbitmq-node")
    conf_d = root / "conf.d"
    conf_d.mkdir()
    amqp, http, prometheus, dist = free_ports(4)
    # Only the ports differ from the container (the machine's own broker holds the usual ones).
    (conf_d / "10-ports.conf").write_text(
        f"listeners.tcp.default = {amqp}\n"
        f"management.tcp.port = {http}\n"
        f"prometheus.tcp.port = {prometheus}\n"
    )
    shutil.copy(DEPLOY / "rabbitmq.conf", conf_d / "90-dnnframe.conf")
    node = f"dnnframe-conftest-{uuid.uuid4().hex[:8]}@localhost"
    env = {
        **os.environ,
        "HOME": str(erlang_home(root)),
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_CONFIG_FILES": str(conf_d),
        "RABBITMQ_CONFIG_FILE": str(root / "none"),
        "RABBITMQ_MNESIA_BASE": str(root / "mnesia"),
        "RABBITMQ_LOG_BASE": str(root / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(DEPLOY / "enabled_plugins"),
        "RABBITMQ_DIST_PORT": str(dist),
        "RABBITMQ_PID_FILE": str(root / "pid"),
    }
    subprocess.run([str(server), "-detached"], env=env, check=True, timeout=60)
    try:
        waited = subprocess.run(
            [
                str(SERVER_BIN / "rabbitmqctl"),
                "-n",
                node,
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
            logs = "".join(p.read_text()[-3000:] for p in (root / "log").glob("*.log"))
            pytest.fail(f"RabbitMQ did not boot with deploy/rabbitmq/:\n{waited.stderr}\n{logs}")
        yield node, env
    finally:
        subprocess.run(
            [str(SERVER_BIN / "rabbitmqctl"), "-n", node, "stop", str(root / "pid")],
            env=env,
            capture_output=True,
            timeout=60,
        )


def _ctl(scratch_node: tuple[str, dict], tool: str, *args: str) -> str:
    node, env = scratch_node
    proc = subprocess.run(
        [str(SERVER_BIN / tool), "-n", node, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"{tool} {args}: {proc.stderr}"
    return proc.stdout


def test_node_runs_with_our_consumer_timeout(scratch_node) -> None:
    conf = (DEPLOY / "rabbitmq.conf").read_text()
    expected = next(
        line.split("=")[1].strip()
        for line in conf.splitlines()
        if line.startswith("consumer_timeout")
    )
    # The stock default is 1800000 (30 min): seeing ours proves the file was read.
    value = _ctl(
        scratch_node, "rabbitmqctl", "eval", "application:get_env(rabbit, consumer_timeout)."
    )
    assert value.strip() == f"{{ok,{expected}}}"


def test_management_plugin_is_enabled(scratch_node) -> None:
    listeners = _ctl(scratch_node, "rabbitmq-diagnostics", "-q", "listeners")
    assert "HTTP API" in listeners, listeners
    # The compose healthcheck's command, against this node.
    assert "succeeded" in _ctl(scratch_node, "rabbitmq-diagnostics", "-q", "ping")
