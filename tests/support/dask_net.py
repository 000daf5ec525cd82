"""Probing the sockets of a Dask deployment: the listeners of a process tree, the loopback
addresses, and the TLS command-line flags of `dask scheduler` / `dask worker`."""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from service.workers.security import TlsSet

LOOPBACK = {"127.0.0.1", "::1"}


@dataclass(frozen=True)
class Listener:
    pid: int
    ip: str
    port: int
    kind: str


def listeners(root_pid: int) -> list[Listener]:
    """Every listening TCP socket and every bound UDP socket of ``root_pid`` and its
    descendants (the API process, its in-process scheduler and nannies, the worker processes)."""
    root = psutil.Process(root_pid)
    found: list[Listener] = []
    for process in [root, *root.children(recursive=True)]:
        try:
            connections = process.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        for conn in connections:
            if conn.status == psutil.CONN_LISTEN:
                found.append(Listener(process.pid, conn.laddr.ip, conn.laddr.port, "tcp"))
            elif conn.status == psutil.CONN_NONE and not conn.raddr:
                found.append(Listener(process.pid, conn.laddr.ip, conn.laddr.port, "udp"))
    return found


def tls_args(tls: TlsSet, role: str) -> list[str]:
    """The ``dask scheduler`` / ``dask worker`` flags for ``role``'s certificate of ``tls``."""
    return [
        "--tls-ca-file",
        str(tls.ca),
        "--tls-cert",
        str(tls.cert(role)),
        "--tls-key",
        str(tls.key(role)),
    ]
