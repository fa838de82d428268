"""The data source's commit service (issue 33.6): a local client without the session's token gets
at most the token line read and the read timeout of a thread, never a 16 MB read without end."""

from __future__ import annotations

import socket
import time

import pytest

from engine.spark.datasource import service


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(service, "READ_TIMEOUT", 0.5)
    svc, srv = service.start(None)  # type: ignore[arg-type]  # no request gets as far as the session
    yield svc
    srv.shutdown()
    srv.server_close()


def _closed_within(conn: socket.socket, seconds: float) -> float:
    conn.settimeout(seconds)
    started = time.monotonic()
    try:
        assert conn.recv(1024) == b""  # closed by the server, no answer
    except ConnectionResetError:  # closed with our unread bytes still queued: a reset, no answer either
        pass
    return time.monotonic() - started


def test_a_silent_client_is_dropped_after_the_read_timeout(server):
    with socket.create_connection((server.host, server.port)) as conn:
        assert _closed_within(conn, 5.0) < 2.0


def test_a_client_without_the_token_gets_no_more_than_the_token_line_read(server):
    with socket.create_connection((server.host, server.port)) as conn:
        conn.sendall(b"x" * 4096)  # no newline, no token: the service stops after 128 bytes
        assert _closed_within(conn, 5.0) < 2.0


def test_a_wrong_token_gets_no_answer(server):
    with socket.create_connection((server.host, server.port)) as conn:
        conn.sendall(b"0" * 64 + b"\n" + b'{"path": "/tmp/x"}\n')
        assert _closed_within(conn, 5.0) < 2.0


def test_the_right_token_with_a_stalled_request_is_dropped_too(server):
    with socket.create_connection((server.host, server.port)) as conn:
        conn.sendall(server.token.encode() + b"\n" + b'{"path": ')  # the rest never comes
        assert _closed_within(conn, 5.0) < 2.0
