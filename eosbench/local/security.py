"""The secured local cluster's material: a per-cluster CA, the brokers' key pair, the admin's SCRAM password.

Made at the first `broker start --security sasl-ssl` in `<state_dir>/security/` (mode 0700, never
committed) and reused on later starts, since the SCRAM credentials were written into the metadata
log when the nodes were formatted. The certificates are made with Python's `cryptography` rather
than keytool or openssl: it needs no extra program on PATH, and Kafka (KIP-651) and librdkafka
both read PEM, so one format serves every client and the broker.

The brokers' certificate names only IP 127.0.0.1 (not `localhost`): everything is on loopback,
and a client that dials `localhost` sees a real hostname mismatch, which the tests rely on.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

ADMIN_USER = "admin"
SCRAM_MECHANISM = "SCRAM-SHA-512"
# The brokers' own principal on the controller listener (TLS client authentication); a super user.
BROKER_CERT_CN = "eosbench-broker"
CERT_VALID_DAYS = 365


@dataclass(frozen=True)
class SecurityMaterial:
    """Where one secured cluster's material lives, and the admin's password."""

    folder: Path
    admin_password: str

    @property
    def ca_file(self) -> Path:
        """The CA certificate (PEM): the truststore of brokers and clients."""
        return self.folder / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        """The brokers' private key and certificate chain (PEM keystore)."""
        return self.folder / "broker-keystore.pem"

    @property
    def client_properties(self) -> Path:
        """The admin user's ready client.properties."""
        return self.folder / "client.properties"

    def jaas_config(self, user: str, password: str) -> str:
        """The Java sasl.jaas.config line of one SCRAM user."""
        return (f'org.apache.kafka.common.security.scram.ScramLoginModule required'
                f' username="{user}" password="{password}";')

    def client_properties_text(self, bootstrap: str, user: str = ADMIN_USER, password: str | None = None) -> str:
        """A client.properties (Java names) that logs in as `user` over SASL_SSL."""
        return (
            "# Made by `eosbench broker start --security sasl-ssl`; holds a password: keep it private.\n"
            f"bootstrap.servers={bootstrap}\n"
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={SCRAM_MECHANISM}\n"
            f"sasl.jaas.config={self.jaas_config(user, password or self.admin_password)}\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.ca_file}\n"
        )


def security_material(state_dir: Path) -> SecurityMaterial:
    """Return the cluster's material, making the CA, key pair and admin password on first use."""
    folder = state_dir / "security"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    password_file = folder / "admin.password"
    if not password_file.exists():
        _write_private(password_file, secrets.token_urlsafe(24))
    material = SecurityMaterial(folder, password_file.read_text().strip())
    if not (material.ca_file.exists() and material.broker_keystore.exists()):
        _make_certificates(material)
    return material


def _write_private(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


def _make_certificates(material: SecurityMaterial) -> None:
    """A self-signed CA and a broker certificate it signs, for serverAuth and clientAuth on 127.0.0.1."""
    ca_key, ca_cert = make_ca("eosbench local CA")
    broker_key, broker_cert = sign_certificate(ca_key, ca_cert, BROKER_CERT_CN, ip="127.0.0.1")
    from cryptography.hazmat.primitives.serialization import Encoding

    material.ca_file.write_bytes(ca_cert.public_bytes(Encoding.PEM))
    _write_private(material.broker_keystore,
                   private_key_pem(broker_key) + broker_cert.public_bytes(Encoding.PEM).decode()
                   + ca_cert.public_bytes(Encoding.PEM).decode())


def make_ca(name: str):
    """A new self-signed CA: (private key, certificate)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CERT_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def sign_certificate(ca_key, ca_cert, common_name: str, ip: str | None = None):
    """A new key pair and a certificate for it signed by the CA, valid for TLS server and client auth."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=CERT_VALID_DAYS))
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if ip is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]),
                                        critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def private_key_pem(key) -> str:
    """A private key as unencrypted PKCS#8 PEM (Kafka's PEM keystore takes it without ssl.key.password)."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
