"""Mutual TLS for the Dask control plane (docs/architecture.md#the-closed-control-plane).

Whoever can talk to the Dask scheduler, a nanny or a worker can run code next to every dataset
(``Client.run_on_scheduler`` is remote code execution by design). So every Dask connection of the
service is TLS with *mutual* authentication against a private CA that exists only for this
service: a peer without a certificate signed by that CA is refused during the handshake, before
any Dask message is read.

Where the certificates come from:

- **Embedded cluster** (no ``DPFIT_DASK_SCHEDULER``): at first start the service makes a
  directory (``DPFIT_DASK_TLS_DIR``; default ``dask-tls`` beside the SQLite file, else
  ``var/dask-tls``) holding a private CA certificate and a certificate + key for each Dask role
  (scheduler, worker, client). The CA's private key is never written: nobody, the service
  included, can issue another certificate for this cluster afterwards. The directory is created
  atomically (built under a temporary name, then renamed), so two services starting at once
  cannot mix two sets; an existing set is never regenerated, so certificates are stable across
  restarts. To rotate, stop the service and remove the directory.
- **External scheduler**: the operator gives the CA, certificate and key the service presents
  (``DPFIT_DASK_TLS_CA``/``_CERT``/``_KEY``), or points ``DPFIT_DASK_TLS_DIR`` at a set made with
  ``python -m service.workers.security DIR`` and starts ``dask scheduler``/``dask worker`` with
  the same directory's files (docs/reference/cluster.md#security-of-the-worker-cluster). The
  address must be ``tls://``.

Guarantees: the returned :class:`distributed.security.Security` has ``require_encryption=True``
and a certificate for every role it is used in. The service refuses to start
(:class:`DaskTlsError`, a message naming the file and the fix) when a file is missing,
unreadable, not owned by the service's user, accessible to group or others (keys; every file of
a generated set), malformed, expired, or — for a generated set — not issued by the set's CA.
Messages name paths and modes only, never key material.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import ssl
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from service.settings import DEFAULT_HOME, Settings

if TYPE_CHECKING:
    from cryptography.x509 import Certificate
    from distributed.security import Security

TLS_DIR_NAME = "dask-tls"
ROLES = ("scheduler", "worker", "client")
CERT_VALIDITY = datetime.timedelta(days=3650)
# A set whose certificates expire within this margin is refused at start, not mid-job.
EXPIRY_MARGIN = datetime.timedelta(days=1)
_PRIVATE_MODE = 0o600


class DaskTlsError(RuntimeError):
    """The Dask TLS material cannot be used; the service must not start without it."""


@dataclass(frozen=True)
class TlsSet:
    """The files of one generated set: a CA certificate and a certificate/key per role."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    def cert(self, role: str) -> Path:
        return self.directory / f"{role}.pem"

    def key(self, role: str) -> Path:
        return self.directory / f"{role}-key.pem"

    def files(self) -> list[Path]:
        return [self.ca, *(p for r in ROLES for p in (self.cert(r), self.key(r)))]


def tls_directory(settings: Settings) -> Path:
    """``DPFIT_DASK_TLS_DIR``, else ``dask-tls`` beside the SQLite file, else ``var/dask-tls``."""
    if settings.dask_tls_dir is not None:
        return settings.dask_tls_dir
    from sqlalchemy.engine import make_url

    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return Path(str(url.database)).expanduser().resolve().parent / TLS_DIR_NAME
    return (DEFAULT_HOME / TLS_DIR_NAME).resolve()


def embedded_security(settings: Settings) -> Security:
    """Mutual TLS for the embedded cluster: the set in :func:`tls_directory`, made if absent."""
    from distributed.security import Security

    tls = ensure_tls_set(tls_directory(settings))
    roles: dict[str, str] = {}
    for role in ROLES:
        roles[f"tls_{role}_cert"] = str(tls.cert(role))
        roles[f"tls_{role}_key"] = str(tls.key(role))
    return Security(
        require_encryption=True,
        tls_ca_file=str(tls.ca),
        tls_min_version=ssl.TLSVersion.TLSv1_3,
        **roles,
    )


def external_security(settings: Settings) -> Security:
    """Mutual TLS towards the operator's scheduler (client role only).

    Uses ``DPFIT_DASK_TLS_CA``/``_CERT``/``_KEY`` when given (all three), else the ``client``
    files of an existing set in :func:`tls_directory` (never made here: a fresh CA could not be
    the one the external cluster trusts).
    """
    from distributed.security import Security

    address = settings.dask_scheduler or ""
    if not address.startswith("tls://"):
        raise DaskTlsError(
            "DPFIT_DASK_SCHEDULER must be a tls:// address (the Dask control plane runs mutual "
            "TLS only); start the scheduler with --tls-ca-file/--tls-cert/--tls-key"
        )
    explicit = (settings.dask_tls_ca, settings.dask_tls_cert, settings.dask_tls_key)
    if any(p is not None for p in explicit):
        ca, cert, key = explicit
        if ca is None or cert is None or key is None:
            raise DaskTlsError(
                "DPFIT_DASK_TLS_CA, DPFIT_DASK_TLS_CERT and DPFIT_DASK_TLS_KEY go together: "
                "give all three or none"
            )
        for path in (ca, cert):
            _check_file(path, private=False)
        _check_file(key, private=True)
        _load_certificate(ca)
        _check_key_matches(key, _load_certificate(cert))
    else:
        tls = TlsSet(tls_directory(settings))
        if not tls.directory.exists():
            raise DaskTlsError(
                f"no Dask TLS material for the external scheduler: {tls.directory} does not "
                "exist. Make a set with `python -m service.workers.security DIR`, start the "
                "scheduler and workers with its files, and set DPFIT_DASK_TLS_DIR=DIR (or set "
                "DPFIT_DASK_TLS_CA, DPFIT_DASK_TLS_CERT and DPFIT_DASK_TLS_KEY)"
            )
        check_tls_set(tls, roles=("client",))
        ca, cert, key = tls.ca, tls.cert("client"), tls.key("client")
    return Security(
        require_encryption=True,
        tls_ca_file=str(ca),
        tls_client_cert=str(cert),
        tls_client_key=str(key),
        tls_min_version=ssl.TLSVersion.TLSv1_3,
    )


def ensure_tls_set(directory: Path) -> TlsSet:
    """The checked set in ``directory``; generated first if the directory is absent or empty."""
    tls = TlsSet(directory)
    if not directory.exists() or (directory.is_dir() and not any(directory.iterdir())):
        _generate(directory)
    check_tls_set(tls)
    return tls


def check_tls_set(tls: TlsSet, roles: tuple[str, ...] = ROLES) -> None:
    """Refuse a set that is incomplete, readable by others, malformed, expired or foreign.

    Only the CA and the files of ``roles`` are looked at (a host of an external cluster holds
    the files of its own role only)."""
    _check_private_directory(tls.directory)
    for path in (tls.ca, *(p for r in roles for p in (tls.cert(r), tls.key(r)))):
        _check_file(path, private=True)
    ca = _load_certificate(tls.ca)
    for role in roles:
        cert = _load_certificate(tls.cert(role))
        try:
            cert.verify_directly_issued_by(ca)
        except Exception:  # noqa: BLE001 - any failure means "not issued by this CA"
            raise DaskTlsError(
                f"{tls.cert(role)} is not issued by the CA in {tls.ca}; the set in "
                f"{tls.directory} is inconsistent (stop the service and remove the directory "
                "to make a new set)"
            ) from None
        _check_key_matches(tls.key(role), cert)


def _check_private_directory(directory: Path) -> None:
    try:
        info = directory.stat()
    except OSError as exc:
        raise DaskTlsError(f"cannot read {directory}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise DaskTlsError(f"{directory} must be a directory (the Dask TLS set)")
    if info.st_uid != os.geteuid():
        raise DaskTlsError(f"{directory} is not owned by the service's user (uid {os.geteuid()})")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise DaskTlsError(
            f"{directory} has mode {mode:04o}; it must not be accessible to group or others "
            f"(chmod 700 {directory})"
        )


def _check_file(path: Path, *, private: bool) -> None:
    try:
        info = path.stat()
        with path.open("rb"):
            pass
    except OSError as exc:
        raise DaskTlsError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise DaskTlsError(f"{path} must be a regular file")
    mode = stat.S_IMODE(info.st_mode)
    if private and info.st_uid != os.geteuid():
        raise DaskTlsError(f"{path} is not owned by the service's user (uid {os.geteuid()})")
    if private and mode & 0o077:
        raise DaskTlsError(
            f"{path} has mode {mode:04o}; it must not be accessible to group or others "
            f"(chmod 600 {path})"
        )


def _load_certificate(path: Path) -> Certificate:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except ValueError:
        raise DaskTlsError(f"{path} is not a PEM certificate") from None
    now = datetime.datetime.now(datetime.UTC)
    if cert.not_valid_after_utc < now + EXPIRY_MARGIN:
        raise DaskTlsError(
            f"the certificate {path} expires on {cert.not_valid_after_utc:%Y-%m-%d}; replace it "
            "(for a generated set: stop the service and remove its directory)"
        )
    if cert.not_valid_before_utc > now:
        raise DaskTlsError(
            f"the certificate {path} is not valid before {cert.not_valid_before_utc}"
        )
    return cert


def _check_key_matches(path: Path, cert: Certificate) -> None:
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError):
        raise DaskTlsError(f"{path} is not an unencrypted PEM private key") from None
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    encoding = serialization.Encoding.DER
    if key.public_key().public_bytes(encoding, public) != cert.public_key().public_bytes(
        encoding, public
    ):
        raise DaskTlsError(f"{path} is not the key of its certificate")


def _generate(directory: Path) -> None:
    """Write a fresh set under a temporary name beside ``directory``, then rename it into place.

    If another process renamed its set first, ours is discarded and theirs is used.
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        os.chmod(staging, 0o700)
        for name, data in _new_set().items():
            _write_private(staging / name, data)
        try:
            os.rename(staging, directory)
        except OSError:
            if not directory.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_MODE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _new_set() -> dict[str, bytes]:
    """PEM files of a new private CA (its key stays in memory) and one leaf per role.

    ECDSA P-256 keys; leaves carry serverAuth and clientAuth (every Dask node both listens and
    connects). Dask does not check host names (``check_hostname=False``), only the chain.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dpfit"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"dpfit Dask CA {os.urandom(4).hex()}"),
        ]
    )
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = {"ca.pem": ca_cert.public_bytes(pem)}
    for role in ROLES:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dpfit"),
                        x509.NameAttribute(NameOID.COMMON_NAME, f"dpfit-dask-{role}"),
                    ]
                )
            )
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + CERT_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName(f"dpfit-dask-{role}"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
            .sign(ca_key, hashes.SHA256())
        )
        files[f"{role}.pem"] = cert.public_bytes(pem)
        files[f"{role}-key.pem"] = key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    return files


def main(argv: list[str] | None = None) -> int:
    """``python -m service.workers.security DIR``: make (or check) a set for an external cluster."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m service.workers.security DIR", file=sys.stderr)
        return 2
    try:
        tls = ensure_tls_set(Path(args[0]).expanduser().resolve())
    except DaskTlsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Dask TLS set in {tls.directory} (CA key not kept; copy only what each host needs):")
    for role in ROLES:
        print(
            f"  {role:9}  --tls-ca-file {tls.ca} --tls-cert {tls.cert(role)} "
            f"--tls-key {tls.key(role)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
