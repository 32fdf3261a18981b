"""Headless Chromium for the browser tests, blind to the machine's network interfaces.

Chromium watches the host's interfaces over netlink, and when an address or a link changes
it fails every request in flight with ``net::ERR_NETWORK_CHANGED``. The suite's other tests
change the root namespace's interfaces while browser tests run (network-namespace hosts add,
cut and delete veth pairs; Docker adds a bridge per compose network), so a page could lose
the scripts it was loading, fire its load event all the same and stay half drawn. Launched
through :func:`launch`, Chromium cannot open a ``NETLINK_ROUTE`` socket: a seccomp filter
(libseccomp, through pyseccomp) set before it starts and inherited by all its processes.
Chromium then takes the network as always online and aborts nothing; its connections to
the test servers are untouched. Chromium has no switch of its own for this.

Where libseccomp is missing the browser starts unfiltered and says so on its stderr.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"  # Debian's chromium package
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def blind() -> None:
    """Refuse (EACCES) every later ``socket(AF_NETLINK, *, NETLINK_ROUTE)`` of this process
    and of everything it starts or executes. Raises ImportError (no pyseccomp), RuntimeError
    (no libseccomp) or OSError (the kernel refused the filter)."""
    import errno
    import socket

    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    rules.add_rule(
        seccomp.ERRNO(errno.EACCES),
        "socket",
        seccomp.Arg(0, seccomp.EQ, socket.AF_NETLINK),
        seccomp.Arg(2, seccomp.EQ, socket.NETLINK_ROUTE),  # interfaces, addresses
    )
    rules.load()


def executable() -> str:
    """A launcher for Playwright's ``executable_path``: it runs this module with this
    Python, which makes itself :func:`blind` and executes Chromium with the arguments."""
    script = f"#!/bin/sh\nexec '{sys.executable}' -m {__name__} \"$@\"\n"
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"dnnframe-chromium-{digest}"
    if not path.is_file():  # made once per interpreter; whole or absent for a reader
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        part.write_text(script)
        part.chmod(0o755)
        part.replace(path)
    return str(path)


def launch(playwright: Any, **options: Any) -> Any:
    """Headless Debian Chromium through Playwright, blind to interface changes."""
    return playwright.chromium.launch(
        executable_path=executable(), args=ARGS, headless=True, **options
    )


def log_failed_requests(page: Any) -> None:
    """Log each of ``page``'s requests that failed in the network, with Chromium's error: a
    script that could not be loaded raises no page error and still lets the load event fire,
    so a page stuck half loaded says why in the failure's captured log."""
    page.on(
        "requestfailed",
        lambda r: logging.getLogger("browser").warning("request failed: %s %s", r.url, r.failure),
    )


def main(argv: list[str]) -> None:
    try:
        blind()
    except (ImportError, RuntimeError, OSError) as exc:
        print(
            f"{__name__}: Chromium starts unfiltered ({exc}): a change of this machine's "
            "network interfaces will fail its requests in flight",
            file=sys.stderr,
        )
    os.execv(CHROMIUM, [CHROMIUM, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
