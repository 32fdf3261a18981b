"""The throw-away RabbitMQ node's Erlang cookie is written before the node or its CLI starts,
so the two cannot create different ones (the CLI is then refused until its wait times out)."""

from __future__ import annotations

import stat

from dnnframe.testing.rabbit import erlang_home


def test_the_cookie_is_written_first_owner_only_and_kept_for_a_restart(tmp_path):
    home = erlang_home(tmp_path)
    cookie = home / ".erlang.cookie"
    first = cookie.read_text()
    assert len(first) == 32 and first.isalnum()
    assert stat.S_IMODE(cookie.stat().st_mode) == 0o400
    assert erlang_home(tmp_path) == home and cookie.read_text() == first
    assert erlang_home(tmp_path / "other").joinpath(".erlang.cookie").read_text() != first
