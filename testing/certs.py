"""Certificates for TLS tests: a CA, and server and client certificates it signed, as PEM files.

Keys are written in PKCS#8, the form Apache's Netty reads (``tls.server.keyPath``); the server
certificate names ``localhost`` and ``127.0.0.1``.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pem:
    cert: Path
    key: Path


@dataclass(frozen=True)
class CertSet:
    ca: Path
    server: Pem
    client: Pem


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path, password: str) -> None:
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))


def make_certs(directory: str | Path, key_password: str = "") -> CertSet:
    """Write ``ca.pem``, ``server.pem``/``server.key`` and ``client.pem``/``client.key`` in ``directory``;
    the two keys are encrypted with ``key_password`` when one is given."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("FerryMQ test CA")).issuer_name(_name("FerryMQ test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    (out / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pems = {}
    for role in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(_name("localhost" if role == "server" else "client"))
                   .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end))
        if role == "server":
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        pem = Pem(out / f"{role}.pem", out / f"{role}.key")
        pem.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, pem.key, key_password)
        pems[role] = pem
    return CertSet(out / "ca.pem", pems["server"], pems["client"])
