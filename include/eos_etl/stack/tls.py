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
from dataclasses import dataclass
from pathlib import Path

CA_DAYS = 3650
BROKER_DAYS = 825
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class BrokerTls:
    ca_file: Path  # the CA certificate clients trust (public)
    keystore_file: Path  # the broker's key, certificate and the CA, PEM (0600): Kafka's PEM keystore


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key():
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    # Unencrypted PKCS#8: Kafka reads it with no key password; the file itself is 0600.
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "eos-etl local"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _load_ca(directory: Path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert_file, key_file = directory / "ca.pem", directory / "ca.key"
    if cert_file.is_file() and key_file.is_file():
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        if cert.not_valid_after_utc - RENEW_BEFORE > _now():
            return cert, serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    return _new_ca(directory)


def _new_ca(directory: Path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

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
    from cryptography import x509

    out = []
    for host in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            out.append(x509.DNSName(host))
    return out


def _broker_cert_current(keystore: Path, ca_cert, hosts: tuple[str, ...]) -> bool:
    from cryptography import x509

    if not keystore.is_file():
        return False
    cert = x509.load_pem_x509_certificate(keystore.read_bytes())  # the first certificate: the broker's own
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return (cert.issuer == ca_cert.subject and cert.not_valid_after_utc - RENEW_BEFORE > _now()
            and set(names) >= set(_sans(hosts)))


def ensure_broker_tls(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> BrokerTls:
    """The CA and a broker certificate for ``hosts`` under ``directory`` (created or renewed when needed)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _load_ca(directory)
    keystore = directory / "broker.pem"
    if not _broker_cert_current(keystore, ca_cert, hosts):
        key = _key()
        cert = (
            x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(_now() - dt.timedelta(minutes=5))
            .not_valid_after(_now() + dt.timedelta(days=BROKER_DAYS))
            .add_extension(x509.SubjectAlternativeName(_sans(hosts)), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        pem = serialization.Encoding.PEM
        _write_private(keystore, cert.public_bytes(pem) + ca_cert.public_bytes(pem) + _pem_key(key))
    return BrokerTls(ca_file=directory / "ca.pem", keystore_file=keystore)
