"""The local CA and serving certificates: files a TLS client accepts for 127.0.0.1, private keys private."""

from __future__ import annotations

import ssl
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509

from controller.api import constants as c
from webhooks.certificates import CertificateAuthority, service_names, write_serving_files

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def test_serving_files_are_written_and_load_as_a_tls_pair(tmp_path: Path) -> None:
    ca = write_serving_files(tmp_path / "certs", NOW)
    cert = x509.load_pem_x509_certificate((tmp_path / "certs" / c.WEBHOOK_CERT_FILE).read_bytes())
    assert cert.issuer == ca.certificate.subject
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert cert.not_valid_before_utc <= NOW < cert.not_valid_after_utc
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "certs" / c.WEBHOOK_CERT_FILE, tmp_path / "certs" / c.WEBHOOK_KEY_FILE)
    assert (tmp_path / "certs" / c.WEBHOOK_CA_FILE).read_bytes() == ca.cert_pem
    assert stat.S_IMODE((tmp_path / "certs" / c.WEBHOOK_KEY_FILE).stat().st_mode) == 0o600


def test_a_renewal_by_the_same_ca_keeps_the_ca_file(tmp_path: Path) -> None:
    ca = write_serving_files(tmp_path, NOW)
    first = (tmp_path / c.WEBHOOK_CERT_FILE).read_bytes()
    assert write_serving_files(tmp_path, NOW + timedelta(days=1), ca=ca) is ca
    assert (tmp_path / c.WEBHOOK_CA_FILE).read_bytes() == ca.cert_pem
    assert (tmp_path / c.WEBHOOK_CERT_FILE).read_bytes() != first


def test_the_ca_is_a_ca_and_service_names_are_the_apiservers() -> None:
    ca = CertificateAuthority.create(NOW)
    assert ca.certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert service_names()[0] == f"{c.WEBHOOK_SERVICE}.{c.TASQ_NAMESPACE}.svc"
