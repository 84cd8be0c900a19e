"""A local certificate authority for the project's own Kafka brokers.

Each Kafka home gets its own CA (``<home>/tls/ca.pem``) and one broker
certificate signed by it for the loopback names the nodes listen on. Clients
verify the broker against ``ca.pem`` (librdkafka's ``ssl.ca.location``, the Java
client's PEM truststore) with host-name verification on, so a SASL password
only ever goes to a broker holding this CA's key.

Made with ``cryptography`` (already pinned through Airflow): nothing is
downloaded, no ``keytool`` run. Keys are written 0600 and never leave the home.
The broker certificate is re-issued when it nears its end or when the names it
must cover change.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
BROKER_DAYS = 825
RENEW_BEFORE = dt.timedelta(days=30)

# The nodes of a cluster write their configurations in parallel threads (storage format): one
# CA per home, not one per thread racing to write ca.pem while another signs with its own key.
_ISSUING = threading.RLock()


@dataclass(frozen=True)
class BrokerTls:
    ca_file: Path  # the CA certificate clients trust (public)
    keystore_file: Path  # the broker's key, certificate and the CA, PEM (0600): Kafka's PEM keystore
    principal: str  # the Kafka principal of the broker's certificate (inter-broker mutual TLS)


@dataclass(frozen=True)
class ClientTls:
    pem_file: Path  # the client's key and certificate, PEM (0600): librdkafka's and Java's keystore
    principal: str  # what Kafka calls the client: User:<subject DN, RFC 2253>


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key) -> bytes:
    # Unencrypted PKCS#8: Kafka reads it with no key password; the file itself is 0600.
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str):
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "eos-etl local"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _load_ca(directory: Path):
    cert_file, key_file = directory / "ca.pem", directory / "ca.key"
    if cert_file.is_file() and key_file.is_file():
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        if cert.not_valid_after_utc - RENEW_BEFORE > _now():
            return cert, serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    return _new_ca(directory)


def _new_ca(directory: Path):
    key = _key()
    name = _name(f"eos-etl local CA {directory.parent.name}")
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - dt.timedelta(minutes=5)).not_valid_after(_now() + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    _write_private(directory / "ca.key", _pem_key(key))
    (directory / "ca.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def _sans(hosts: tuple[str, ...]):
    out = []
    for host in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            out.append(x509.DNSName(host))
    return out


def _principal(cert) -> str:
    # Kafka's default SSL principal: the subject as Java's X500Principal.getName() prints it (RFC 2253).
    return f"User:{cert.subject.rfc4514_string()}"


def _current_cert(pem_file: Path, ca_cert, usages) -> object | None:
    """The first certificate in ``pem_file`` if this CA issued it, it is far from its end and it
    allows every extended key usage in ``usages``; else None (to be issued anew)."""
    if not pem_file.is_file():
        return None
    cert = x509.load_pem_x509_certificate(pem_file.read_bytes())
    try:
        eku = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return None
    if cert.not_valid_after_utc - RENEW_BEFORE <= _now() or not set(usages) <= eku:
        return None
    try:  # signed by this CA's key, not by an earlier CA of the same name
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return None
    return cert


def _issue(pem_file: Path, ca_cert, ca_key, common_name: str, usages, sans=None):
    """A new key and a certificate for it signed by the CA, written with the CA's certificate (0600)."""
    key = _key()
    builder = (
        x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(_now() - dt.timedelta(minutes=5))
        .not_valid_after(_now() + dt.timedelta(days=BROKER_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pem = serialization.Encoding.PEM
    _write_private(pem_file, cert.public_bytes(pem) + ca_cert.public_bytes(pem) + _pem_key(key))
    return cert


def _covers(cert, hosts: tuple[str, ...]) -> bool:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(names) >= set(_sans(hosts))


def ensure_broker_tls(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> BrokerTls:
    """The CA and a broker certificate for ``hosts`` under ``directory`` (created or renewed when needed).

    The broker certificate serves TLS and also authenticates the broker as a client to the other
    nodes (mutual TLS on the inter-broker and controller listeners when PLAINTEXT is off).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    keystore = directory / "broker.pem"
    usages = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)
    with _ISSUING:
        ca_cert, ca_key = _load_ca(directory)
        cert = _current_cert(keystore, ca_cert, usages)
        if cert is None or not _covers(cert, hosts):
            cert = _issue(keystore, ca_cert, ca_key, hosts[0], usages, _sans(hosts))
    return BrokerTls(ca_file=directory / "ca.pem", keystore_file=keystore, principal=_principal(cert))


def ensure_client_tls(directory: Path, common_name: str) -> ClientTls:
    """A client certificate for ``common_name`` from the same CA (``<directory>/<common_name>.pem``, 0600)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    pem_file = directory / f"{common_name}.pem"
    usages = (ExtendedKeyUsageOID.CLIENT_AUTH,)
    with _ISSUING:
        ca_cert, ca_key = _load_ca(directory)
        cert = _current_cert(pem_file, ca_cert, usages)
        if cert is None:
            cert = _issue(pem_file, ca_cert, ca_key, common_name, usages)
    return ClientTls(pem_file=pem_file, principal=_principal(cert))
