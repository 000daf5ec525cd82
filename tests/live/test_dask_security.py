"""The Dask control plane is closed (issue 9 item 1; docs/architecture.md#the-closed-control-plane).

Against a real ``dpfit serve``: every Dask listener of the service's process tree is mutual TLS
on loopback, an unauthenticated or foreign-certificate client is refused (while the service's
own client certificate connects: the test does find the scheduler), no HTTP page answers on any
Dask port, and jobs still run. Without a server: the certificate set is made once with private
permissions, kept across restarts, and refused — with a clear message — when it is unsafe.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from distributed import Client
from distributed.security import Security

from service.settings import Settings
from service.workers.security import (
    DaskTlsError,
    TlsSet,
    embedded_security,
    ensure_tls_set,
    external_security,
)
from tests.support.dask_net import LOOPBACK, listeners
from tests.support.fixtures import EXAMPLES
from tests.support.live import LiveServer, run_walkthrough_job, start_server

INFO_PAGES = (
    "/info/main/workers.html",
    "/json/identity.json",
    "/eventstream",
    "/metrics",
    "/health",
    "/status",
)


def dask_ports(server: LiveServer) -> list[int]:
    assert server.process is not None
    ports = sorted({s.port for s in listeners(server.process.pid) if s.kind == "tcp"})
    return [p for p in ports if p != server.port]


@pytest.fixture(scope="module")
def closed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    home = tmp_path_factory.mktemp("closed-server")
    server = start_server(f"sqlite:///{home / 'dpfit.db'}", data_roots=[EXAMPLES], home=home)
    try:
        yield server
    finally:
        server.stop()


def _service_client_security(server: LiveServer) -> Security:
    tls = TlsSet(server.home / "dask-tls")
    return Security(
        require_encryption=True,
        tls_ca_file=str(tls.ca),
        tls_client_cert=str(tls.cert("client")),
        tls_client_key=str(tls.key("client")),
    )


def _foreign_security(trust_our_ca: Path | None) -> Security:
    """A certificate from another CA; optionally trusting our CA (so that only the server's
    check of the *client* certificate can refuse it)."""
    foreign = Security.temporary()
    if trust_our_ca is not None:
        foreign.tls_ca_file = str(trust_our_ca)
    return foreign


def test_no_socket_of_the_service_listens_beyond_loopback(closed_server: LiveServer) -> None:
    assert closed_server.process is not None
    found = listeners(closed_server.process.pid)
    # The API port, the scheduler, one nanny and one worker (DPFIT_WORKERS=1) — and nothing
    # else: no HTTP server of the scheduler or the worker.
    assert closed_server.port in {s.port for s in found}
    assert len(dask_ports(closed_server)) == 3, found
    exposed = [s for s in found if s.ip not in LOOPBACK]
    assert exposed == [], f"sockets beyond loopback: {exposed}"


def test_only_the_services_certificate_reaches_the_scheduler(closed_server: LiveServer) -> None:
    """Every Dask port refuses a plaintext client, a client with a certificate of another CA,
    and one that trusts our CA but holds a foreign certificate. Control: the service's own
    client certificate reaches exactly one scheduler, which runs in the API process."""
    assert closed_server.process is not None
    ports = dask_ports(closed_server)
    our_ca = TlsSet(closed_server.home / "dask-tls").ca
    attempts = {
        "plaintext": ("tcp", None),
        "other CA": ("tls", _foreign_security(None)),
        "foreign client cert": ("tls", _foreign_security(our_ca)),
    }
    for port in ports:
        for name, (protocol, security) in attempts.items():
            address = f"{protocol}://127.0.0.1:{port}"
            try:
                with Client(address, security=security, timeout="3s") as client:
                    pid = client.run_on_scheduler(os.getpid)
            except OSError:
                continue  # refused before any Dask message: what we want
            except Exception as exc:  # noqa: BLE001 - a Dask-level answer: the port talked
                pytest.fail(f"{name} client talked to {address} ({type(exc).__name__})")
            pytest.fail(f"{name} client ran code on the scheduler at {address} (pid {pid})")

    ours = _service_client_security(closed_server)
    kinds = {port: asyncio.run(_server_type(f"tls://127.0.0.1:{port}", ours)) for port in ports}
    schedulers = [port for port, kind in kinds.items() if kind.endswith("Scheduler")]
    assert len(schedulers) == 1, kinds
    with Client(f"tls://127.0.0.1:{schedulers[0]}", security=ours, timeout="60s") as client:
        assert client.run_on_scheduler(os.getpid) == closed_server.process.pid


async def _server_type(address: str, security: Security) -> str:
    """What Dask server listens at ``address`` (its ``identity`` handler), asked over the
    service's own mutual TLS — a direct answer, where probing every port with a Client took a
    connect timeout per non-scheduler port (and under load the scheduler's too)."""
    from distributed.core import rpc

    args = security.get_connection_args("client")
    async with rpc(address, connection_args=args, timeout=60) as server:
        identity = await server.identity()
    return str(identity.get("type", ""))


def test_no_http_page_answers_on_any_dask_port(closed_server: LiveServer) -> None:
    for port in dask_ports(closed_server):
        for scheme in ("http", "https"):
            for page in INFO_PAGES:
                url = f"{scheme}://127.0.0.1:{port}{page}"
                try:
                    response = httpx.get(url, timeout=5, verify=False)
                except httpx.HTTPError:
                    continue
                pytest.fail(f"{url} answered HTTP {response.status_code}")


def test_jobs_still_run_over_the_closed_control_plane(closed_server: LiveServer) -> None:
    state = run_walkthrough_job(closed_server)
    assert state["status"] == "succeeded", state["error"]


def test_the_service_refuses_to_start_with_a_readable_key(tmp_path: Path) -> None:
    tls = ensure_tls_set(tmp_path / "dask-tls")
    tls.key("worker").chmod(0o644)
    with pytest.raises(RuntimeError, match="exited early"):
        start_server(f"sqlite:///{tmp_path / 'dpfit.db'}", data_roots=[EXAMPLES], home=tmp_path)
    log = "".join(p.read_text() for p in tmp_path.glob("server-*.log"))
    assert f"{tls.key('worker')} has mode 0644" in log
    assert "chmod 600" in log


# --- the certificate set, without a server ---------------------------------------------------


def test_the_set_is_private_and_issued_by_its_own_ca(tmp_path: Path) -> None:
    tls = ensure_tls_set(tmp_path / "tls")
    assert stat.S_IMODE(tls.directory.stat().st_mode) == 0o700
    assert sorted(p.name for p in tls.directory.iterdir()) == sorted(p.name for p in tls.files())
    for path in tls.files():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert not any("ca-key" in p.name for p in tls.directory.iterdir())
    assert [p.name for p in tmp_path.iterdir()] == ["tls"]  # no staging directory left


def test_an_existing_set_is_never_regenerated(tmp_path: Path) -> None:
    first = {p.name: p.read_bytes() for p in ensure_tls_set(tmp_path / "tls").files()}
    second = {p.name: p.read_bytes() for p in ensure_tls_set(tmp_path / "tls").files()}
    assert first == second


def test_the_embedded_set_lives_beside_the_sqlite_file(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'db' / 'dpfit.db'}",
        data_roots=(),
        workers=1,
        dask_scheduler=None,
    )
    security = embedded_security(settings)
    assert security.require_encryption
    directory = tmp_path / "db" / "dask-tls"
    assert security.tls_ca_file == str(directory / "ca.pem")
    for role in ("scheduler", "worker", "client"):
        assert getattr(security, f"tls_{role}_cert") == str(directory / f"{role}.pem")
        assert getattr(security, f"tls_{role}_key") == str(directory / f"{role}-key.pem")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda t: t.directory.chmod(0o755), "has mode 0755"),
        (lambda t: t.key("client").chmod(0o640), "has mode 0640"),
        (lambda t: t.cert("scheduler").chmod(0o604), "has mode 0604"),
        (lambda t: t.key("scheduler").unlink(), "cannot read"),
        (lambda t: t.cert("worker").write_text("not a certificate"), "is not a PEM certificate"),
        (lambda t: t.key("worker").write_bytes(t.key("client").read_bytes()), "not the key of"),
    ],
)
def test_an_unsafe_or_broken_set_is_refused(tmp_path: Path, damage, message: str) -> None:  # noqa: ANN001
    tls = ensure_tls_set(tmp_path / "tls")
    damage(tls)
    with pytest.raises(DaskTlsError, match=message):
        ensure_tls_set(tmp_path / "tls")


def test_a_certificate_from_another_set_is_refused(tmp_path: Path) -> None:
    ours = ensure_tls_set(tmp_path / "ours")
    theirs = ensure_tls_set(tmp_path / "theirs")
    for path in (ours.cert("client"), ours.key("client")):
        path.write_bytes((theirs.directory / path.name).read_bytes())
    with pytest.raises(DaskTlsError, match="is not issued by the CA"):
        ensure_tls_set(ours.directory)


def _external(tmp_path: Path, address: str, **paths: Path) -> Settings:
    return Settings(
        database_url=f"sqlite:///{tmp_path / 'dpfit.db'}",
        data_roots=(),
        workers=1,
        dask_scheduler=address,
        dask_tls_dir=tmp_path / "dask-tls",
        **paths,
    )


def test_an_external_scheduler_needs_tls_and_existing_certificates(tmp_path: Path) -> None:
    with pytest.raises(DaskTlsError, match="must be a tls:// address"):
        external_security(_external(tmp_path, "tcp://127.0.0.1:8786"))
    with pytest.raises(DaskTlsError, match="does not exist"):
        external_security(_external(tmp_path, "tls://127.0.0.1:8786"))
    assert not (tmp_path / "dask-tls").exists()  # never invented for an external cluster
    tls = ensure_tls_set(tmp_path / "operator")
    with pytest.raises(DaskTlsError, match="give all three or none"):
        external_security(_external(tmp_path, "tls://127.0.0.1:8786", dask_tls_ca=tls.ca))
    security = external_security(
        _external(
            tmp_path,
            "tls://127.0.0.1:8786",
            dask_tls_ca=tls.ca,
            dask_tls_cert=tls.cert("client"),
            dask_tls_key=tls.key("client"),
        )
    )
    assert security.require_encryption
    assert security.tls_client_cert == str(tls.cert("client"))


def test_the_api_host_of_an_external_cluster_needs_only_the_client_files(tmp_path: Path) -> None:
    tls = ensure_tls_set(tmp_path / "dask-tls")
    for role in ("scheduler", "worker"):
        tls.cert(role).unlink()
        tls.key(role).unlink()
    security = external_security(_external(tmp_path, "tls://127.0.0.1:8786"))
    assert security.tls_ca_file == str(tls.ca)
    assert security.tls_client_key == str(tls.key("client"))
    tls.key("client").chmod(0o644)
    with pytest.raises(DaskTlsError, match="has mode 0644"):
        external_security(_external(tmp_path, "tls://127.0.0.1:8786"))
