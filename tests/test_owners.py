"""Worker names ``<node>:<pid>``: built and split in one place (dnnframe.owners)."""

from __future__ import annotations

import os
import socket

import pytest

from dnnframe.owners import WorkerName, celery_node, default_worker_name, split_owner, worker_name


@pytest.mark.parametrize(
    "node, pid, text",
    [
        ("host", 12, "host:12"),
        ("celery@box", 0, "celery@box:0"),
        ("::1", 7, "::1:7"),  # an IPv6 address as the node
        ("fe80::a:b", 4321, "fe80::a:b:4321"),
        ("celery@node:with:colons", 99, "celery@node:with:colons:99"),
        ("host", None, "host"),
    ],
)
def test_name_round_trips(node, pid, text):
    assert str(WorkerName(node, pid)) == text
    assert WorkerName.parse(text) == WorkerName(node, pid)


@pytest.mark.parametrize(
    "text, node",
    [
        ("host", "host"),  # a node's own name: no pid
        ("host:", "host:"),
        (":12", ":12"),  # no node before the pid
        ("host:abc", "host:abc"),
        ("host:-3", "host:-3"),
        ("host:\u00b2", "host:\u00b2"),  # a digit to str.isdigit(), not to int()
        ("host:12 ", "host:12 "),
    ],
)
def test_a_name_without_a_pid_is_a_node(text, node):
    assert WorkerName.parse(text) == WorkerName(node, None)
    assert split_owner(text) == (node, None)


@pytest.mark.parametrize("bad", ["", None])
def test_parse_refuses_an_empty_name(bad):
    with pytest.raises(ValueError, match="non-empty"):
        WorkerName.parse(bad)
    assert split_owner(bad) == ("", None)  # a trial with no owner


@pytest.mark.parametrize(
    "node, pid, message",
    [
        ("", 1, "non-empty node"),
        (None, 1, "non-empty node"),
        ("h", -1, "pid must be an integer >= 0"),
        ("h", "12", "pid must be"),
        ("h", True, "pid must"),
    ],
)
def test_building_refuses_bad_parts(node, pid, message):
    with pytest.raises(ValueError, match=message):
        WorkerName(node, pid)


def test_this_process_and_celery_defaults():
    host = socket.gethostname()
    assert default_worker_name() == f"{host}:{os.getpid()}"
    assert worker_name("celery@n1") == f"celery@n1:{os.getpid()}"
    assert worker_name(pid=5) == f"{host}:5"
    assert split_owner(worker_name("celery@a:b")) == ("celery@a:b", os.getpid())
    assert celery_node(None) == f"celery@{host}"
    assert celery_node("w1@box") == "w1@box"
