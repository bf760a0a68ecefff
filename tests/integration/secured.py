"""Real Prometheus and Alertmanager behind TLS and basic auth, with certificates made here.

`certificates(directory)` makes a CA (openssl), a server certificate for 127.0.0.1 and a client
certificate, both signed by it. `web_config(...)` writes the `--web.config.file` both servers
read (exporter-toolkit's format): TLS with that certificate, client certificates required and
verified against the CA, and one basic-auth user whose password is stored as a bcrypt hash.
`secured_prometheus` and `secured_alertmanager` start the servers with it on 127.0.0.1 and
wait until they answer an authenticated, verified request.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.integration.alertmanager import CONFIG as ALERTMANAGER_CONFIG
from tests.integration.alertmanager import find_binary
from tests.integration.servers import LOOPBACK, Server, free_port, launch, prometheus_argv

USER = "policyd"


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def certificates(directory: Path) -> Certificates:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, in `directory`."""
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is not installed")
    d = directory
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", "/CN=policyd test CA", "-keyout", str(d / "ca-key.pem"),
             "-out", str(d / "ca.pem"))
    ext = d / "server.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    client_ext = d / "client.ext"
    client_ext.write_text("extendedKeyUsage=clientAuth\n")
    for name, subject, extensions in (("server", "/CN=127.0.0.1", ext),
                                      ("client", "/CN=policyd", client_ext)):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                 "-keyout", str(d / f"{name}-key.pem"), "-out", str(d / f"{name}.csr"))
        _openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.pem"),
                 "-CAkey", str(d / "ca-key.pem"), "-CAcreateserial", "-days", "2",
                 "-extfile", str(extensions), "-out", str(d / f"{name}.pem"))
    return Certificates(ca=d / "ca.pem", server_cert=d / "server.pem",
                        server_key=d / "server-key.pem", client_cert=d / "client.pem",
                        client_key=d / "client-key.pem")


def bcrypt_hash(password: str) -> str:
    """The bcrypt hash exporter-toolkit's basic_auth_users wants (libxcrypt through `crypt`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # noqa: PLC0415 (deprecated module, only here; the C library does bcrypt)

        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))


def web_config(directory: Path, certs: Certificates, password: str) -> Path:
    path = directory / "web.yml"
    path.write_text(
        "tls_server_config:\n"
        f"  cert_file: {certs.server_cert}\n"
        f"  key_file: {certs.server_key}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
        f"  client_ca_file: {certs.ca}\n"
        "basic_auth_users:\n"
        f"  {USER}: '{bcrypt_hash(password)}'\n")
    return path


def wait_secured(url: str, certs: Certificates, password: str, server: Server) -> None:
    """Poll `url` (https, client certificate, basic auth) until it answers 200."""
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    token = base64.b64encode(f"{USER}:{password}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited:\n{server.log.read_text()}")
        with contextlib.suppress(OSError, urllib.error.URLError), \
                urllib.request.urlopen(request, timeout=1, context=context) as response:
            if response.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within 30 s:\n{server.log.read_text()}")


@contextlib.contextmanager
def _serving(server: Server, ready: str, certs: Certificates, password: str
             ) -> Iterator[Server]:
    try:
        wait_secured(server.url + ready, certs, password, server)
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def secured_prometheus(directory: Path, certs: Certificates, password: str) -> Iterator[Server]:
    """A real Prometheus on https://127.0.0.1:PORT scraping nothing, behind `web_config`."""
    port = free_port()
    argv = [*prometheus_argv(directory, [], port=port),
            f"--web.config.file={web_config(directory, certs, password)}"]
    log = directory / "prometheus.log"
    server = Server(url=f"https://{LOOPBACK}:{port}", process=launch(argv, log), log=log)
    with _serving(server, "/-/ready", certs, password) as ready:
        yield ready


@contextlib.contextmanager
def secured_alertmanager(directory: Path, certs: Certificates, password: str
                         ) -> Iterator[Server]:
    """A real Alertmanager on https://127.0.0.1:PORT behind `web_config`."""
    port = free_port()
    config = directory / "alertmanager.yml"
    config.write_text(ALERTMANAGER_CONFIG)
    argv = [find_binary(), f"--config.file={config}", f"--storage.path={directory / 'am'}",
            f"--web.listen-address={LOOPBACK}:{port}", "--cluster.listen-address=",
            f"--web.config.file={web_config(directory, certs, password)}"]
    log = directory / "alertmanager.log"
    server = Server(url=f"https://{LOOPBACK}:{port}", process=launch(argv, log), log=log)
    with _serving(server, "/-/ready", certs, password) as ready:
        yield ready
