"""A small CA and the serving certificates it signs, for tasq's webhooks on a local control plane.

`tasq dev` and `tasq run --local-webhooks` have no cert-manager: `write_serving_files` makes a CA and a
certificate for 127.0.0.1/localhost, writes ca.crt, tls.crt and tls.key, and the CA goes into the
webhook configurations' caBundle. Keys are EC P-256. Called by controller.kube.webhooking and tests.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.api import constants as c

LOCAL_NAMES: Final = ("127.0.0.1", "localhost")
_CLOCK_SKEW: Final = timedelta(minutes=5)


def _subject(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _alt_names(names: list[str] | tuple[str, ...]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


@dataclass(frozen=True)
class CertificateAuthority:
    """A self-signed CA; `issue` signs serving certificates valid from `now` for `days`."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @classmethod
    def create(cls, now: datetime, days: int = 365, common_name: str = "tasq-webhook-ca") -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        usage = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                              key_encipherment=False, data_encipherment=False, key_agreement=False,
                              encipher_only=False, decipher_only=False)
        cert = (x509.CertificateBuilder().subject_name(_subject(common_name)).issuer_name(_subject(common_name))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - _CLOCK_SKEW).not_valid_after(now + timedelta(days=days))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(usage, critical=True)
                .sign(key, hashes.SHA256()))
        return cls(key, cert)

    @property
    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(self, names: list[str] | tuple[str, ...], now: datetime, days: int = 365) -> tuple[bytes, bytes]:
        """(certificate PEM, key PEM) of a serving certificate for these DNS names / IP addresses."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(_subject(names[0])).issuer_name(self.certificate.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - _CLOCK_SKEW).not_valid_after(now + timedelta(days=days))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(_alt_names(names), critical=False)
                .sign(self.key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def service_names(service: str = c.WEBHOOK_SERVICE, namespace: str = c.TASQ_NAMESPACE) -> tuple[str, ...]:
    """The DNS names kube-apiserver checks when it calls a webhook through a Service."""
    return (f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


def _write_private(path: Path, data: bytes) -> None:
    """Write a key readable by its owner only, replacing the file in one rename."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def write_serving_files(directory: Path, now: datetime, names: tuple[str, ...] = LOCAL_NAMES,
                        ca: CertificateAuthority | None = None) -> CertificateAuthority:
    """Write ca.crt, tls.crt and tls.key (a certificate for `names` signed by `ca`, a new CA when
    none is given) into `directory`; returns the CA. Each file is replaced atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = ca or CertificateAuthority.create(now)
    cert_pem, key_pem = ca.issue(names, now)
    (directory / c.WEBHOOK_CA_FILE).write_bytes(ca.cert_pem)
    _write_private(directory / c.WEBHOOK_KEY_FILE, key_pem)
    tmp = directory / (c.WEBHOOK_CERT_FILE + ".tmp")
    tmp.write_bytes(cert_pem)
    tmp.replace(directory / c.WEBHOOK_CERT_FILE)
    return ca
