"""Machines made of Linux network namespaces, for tests of workers on several hosts.

Each host is a network namespace with one veth pair to the root namespace on a private
/30 and no other route: a process in it reaches the root side's address of its own cable
and nothing else (not the machine's loopback services, nothing off the machine). Cutting
the cable (``ip link set VETH down``) is a host falling off the network while its
processes go on. Services of the root namespace that listen on 127.0.0.1 only are offered
on a host's address by a TCP forwarder, so the machine's shared ones are never
reconfigured. Needs root and iproute2; every namespace and link is deleted on exit.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

#: Names of this harness's namespaces start with this, then the pid of the creating process.
NS_PREFIX = "dnnframe-t"
_SUBNETS = "10.231"  # 10.231.N.0/29 per run: two /30s, one per host


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def netns_problem() -> str | None:
    """Why network-namespace hosts cannot be made here (None when they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (these tests run as root in CI)"
    if shutil.which("ip") is None:
        return "no `ip` command (install Debian's iproute2)"
    if shutil.which("unshare") is None:
        return "no `unshare` command (util-linux)"
    probe = f"{NS_PREFIX}{os.getpid()}-probe"
    made = _ip("netns", "add", probe, check=False)
    _ip("netns", "del", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace here: {made.stderr.strip()}"
    return None


@dataclass
class NetnsHost:
    """One "machine": a network namespace and the veth pair that is its only cable."""

    name: str  # the namespace (and the hostname a test gives its workers)
    veth: str  # the pair's end in the root namespace: cut it to cut the host off
    address: str  # that end's address: where the host reaches the root's services
    peer_address: str  # the host's own address

    def set_link(self, up: bool) -> None:
        """Plug the host's cable in (``up``) or pull it out."""
        _ip("link", "set", self.veth, "up" if up else "down")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_namespaces() -> None:
    """Delete namespaces of this harness left by a test process that was killed before its
    teardown (its pid is in the name; a deleted namespace takes its veth pair with it)."""
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    for line in listed:
        name = line.split(" ")[0]
        pid = name[len(NS_PREFIX) :].split("-")[0]
        if name.startswith(NS_PREFIX) and pid.isdigit() and not _pid_alive(int(pid)):
            _ip("netns", "del", name, check=False)


def _free_subnet() -> int:
    """A third octet N such that nothing on this machine has an address in 10.231.N.0/24."""
    used = _ip("-4", "-o", "addr", "show").stdout + _ip("-4", "route", "show").stdout
    free = [n for n in range(256) if f"{_SUBNETS}.{n}." not in used]
    if not free:
        raise RuntimeError(f"every {_SUBNETS}.N.0/24 is in use on this machine")
    return random.choice(free)


@contextlib.contextmanager
def netns_hosts(count: int) -> Iterator[list[NetnsHost]]:
    """``count`` hosts (at most 2 per /29), each on its own /30 of a 10.231.N.0/29 that no
    interface here uses; their namespaces and links are deleted on exit, whatever happened.
    """
    if count > 2:
        raise ValueError(f"count must be at most 2, but got {count}")
    remove_stale_namespaces()
    tag = uuid.uuid4().hex[:6]
    subnet = _free_subnet()
    hosts = [
        NetnsHost(
            name=f"{NS_PREFIX}{os.getpid()}-{tag}-{i}",
            veth=f"dnf{tag}{i}",  # interface names are at most 15 characters
            address=f"{_SUBNETS}.{subnet}.{4 * i + 1}",
            peer_address=f"{_SUBNETS}.{subnet}.{4 * i + 2}",
        )
        for i in range(count)
    ]
    try:
        for h in hosts:
            _ip("netns", "add", h.name)
            _ip("link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.name)
            _ip("addr", "add", f"{h.address}/30", "dev", h.veth)
            _ip("link", "set", h.veth, "up")
            _ip("-n", h.name, "addr", "add", f"{h.peer_address}/30", "dev", "eth0")
            _ip("-n", h.name, "link", "set", "eth0", "up")
            _ip("-n", h.name, "link", "set", "lo", "up")
        yield hosts
    finally:
        for h in hosts:
            # The root end first: the namespace's own end goes with it at once, while a
            # deleted namespace is torn down by the kernel later.
            _ip("link", "del", h.veth, check=False)
            _ip("netns", "del", h.name, check=False)


def subnet_of(hosts: list[NetnsHost]) -> str:
    """The /29 (CIDR) that holds every host's pair of addresses."""
    first = hosts[0].address.rsplit(".", 1)[0]
    return f"{first}.0/29"


class TcpForwarder:
    """Relays every connection made to ``listen`` (address, port 0 for a free one) to
    ``target``, byte for byte, in threads of this process; :meth:`close` ends them all.
    A relayed connection closes when either side closes."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]):
        self.target = target
        self._server = socket.create_server(listen, reuse_port=False)
        self.port = self._server.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name=f"forward:{self.port}").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):  # one side ended: end the relayed connection both ways
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            opened, self._open = self._open, []
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._server.close()
        for s in opened:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
