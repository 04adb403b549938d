"""The example project as shipped, in production mode, on real sockets: what the interop
tests run against.

- **Acme** (``acme.example``): ``example_project.settings`` and its URLs unchanged,
  ``DJANGO_DEBUG=0``, uvicorn over TLS (a certificate from a throwaway CA), a Celery worker,
  PostgreSQL and Redis of its own (:class:`tests.multiprocess.cluster.Cluster`).
- **The personal agents' sites** (``atlas.example``, ``plain.example``): their
  ``AgentIdentity`` documents served over TLS by uvicorn in a thread of the test process.
  Acme fetches them through its own outbound hooks (``POPPY_OUTBOUND_ROUTES`` /
  ``POPPY_OUTBOUND_CA_FILE``, ``example_project/outbound.py``).

Only the network routing differs from a deployment: every name is dialled on loopback,
keeping its own name for TLS (SNI and certificate checks).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from personal_agent_protocol.demo.kit import AgentIdentity

from tests.authority.sdk_agent import DOMAIN, ORIGIN
from tests.multiprocess.cluster import ROOT, Cluster, free_port
from tests.threaded_server import serve

#: What every routed name "resolves" to for the SSRF rules on both sides (a public address).
PUBLIC_ADDRESS = "93.184.216.34"
#: The example project's demo customers and their published password (shop/demo_accounts.py),
#: there because these runs say the project is a demo (ACME_DEMO_ACCOUNTS=1).
ACCOUNTS = ("acct-1", "acct-2")
PASSWORD = "acme-demo"
#: Shipped defaults the multiprocess launcher shortens for its own tests: not overridden here.
_LAUNCHER_OVERRIDES = (
    "POPPY_AUTHENTICATE",
    "POPPY_ALLOW_FAKE_VERIFIER",
    "POPPY_LEASE_SECONDS",
    "POPPY_HEARTBEAT_SECONDS",
)


class Authority:
    """A throwaway CA and the leaf certificates it issues."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.now = datetime.datetime.now(datetime.UTC)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "interop test CA")])
        ca = (
            self._builder(self.name, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    def _builder(self, subject: x509.Name, public_key: Any) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.now - datetime.timedelta(minutes=5))
            .not_valid_after(self.now + datetime.timedelta(days=1))
        )

    def issue(self, *names: str) -> tuple[Path, Path]:
        """(certificate, key) PEM files for ``names``."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
        leaf = (
            self._builder(subject, key.public_key())
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False
            )
            .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        cert_file = self.directory / f"{names[0]}.pem"
        key_file = self.directory / f"{names[0]}-key.pem"
        cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return cert_file, key_file

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


class AgentSites:
    """The personal agents' websites (their client metadata and JWKS) over TLS, by Host."""

    def __init__(self, identities: list[AgentIdentity], tls: tuple[Path, Path]) -> None:
        self.apps = {identity.domain: identity.website() for identity in identities}
        self.tls = tls
        self.port = 0
        self._serving = contextlib.ExitStack()

    async def _by_host(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        host = dict(scope["headers"]).get(b"host", b"").decode().split(":", 1)[0]
        app = self.apps.get(host)
        if app is None:
            await send({"type": "http.response.start", "status": 421, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    def start(self) -> None:
        url = self._serving.enter_context(
            serve(self._by_host, tls=self.tls, interface="asgi3", name="agent-sites")
        )
        self.port = int(url.rsplit(":", 1)[1])

    def stop(self) -> None:
        self._serving.close()


class RoutedAsyncTransport(httpx.AsyncBaseTransport):
    """The test's network: every known name dialled on loopback, TLS still naming it."""

    def __init__(self, routes: dict[str, int], verify: ssl.SSLContext) -> None:
        self.routes = routes
        self.inner = httpx.AsyncHTTPTransport(verify=verify)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        port = self.routes.get(request.url.host)
        if port is None:
            raise httpx.ConnectError(f"{request.url.host} is not on the test network")
        routed = httpx.Request(
            request.method,
            request.url.copy_with(host="127.0.0.1", port=port),
            headers=request.headers,
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": request.url.host},
        )
        return await self.inner.handle_async_request(routed)

    async def aclose(self) -> None:
        await self.inner.aclose()


#: A 5xx answer in uvicorn's access log, or a traceback anywhere.
_SERVER_ERROR = re.compile(r'" (5\d\d) ')


#: A Mediated Sign-In's one-time code in the mail that carries it.
_EMAILED_CODE = re.compile(r"sign(?:ing)? your personal agent in to [^:]+: (\d{6})")


class ShippedAcme:
    """Acme as shipped and the agents' sites, running; clients and resolvers to reach them."""

    def __init__(
        self, tmp: Path, identities: list[AgentIdentity], env: dict[str, str] | None = None
    ) -> None:
        self.tmp = tmp
        self.identities = identities
        self.env = env or {}
        self.authority = Authority(tmp)
        self.sites = AgentSites(identities, self.authority.issue(*(i.domain for i in identities)))
        self.acme_tls = self.authority.issue(DOMAIN)
        self.cluster = Cluster(tmp, name=None, log_level="info")
        self.port = 0
        self.services = ["web", "worker"]

    def start(self) -> None:
        self.sites.start()
        routes = {
            identity.domain: {"address": PUBLIC_ADDRESS, "dial": f"127.0.0.1:{self.sites.port}"}
            for identity in self.identities
        }
        for name in _LAUNCHER_OVERRIDES:
            self.cluster.env.pop(name, None)
        self.cluster.env.update(
            {
                "DJANGO_DEBUG": "0",
                "ACME_DEMO_ACCOUNTS": "1",
                "DJANGO_ALLOWED_HOSTS": DOMAIN,
                "POPPY_BASE_URL": ORIGIN,
                "POPPY_OUTBOUND_ROUTES": json.dumps(routes),
                "POPPY_OUTBOUND_CA_FILE": str(self.authority.ca_file),
            }
        )
        # Migrated as shipped (from the template the shipped deployments share: a settings
        # module of the test's would hash the demo accounts' password with its own hasher).
        self.cluster.create()
        self.cluster.env.update(self.env)
        self.port = free_port()
        self.cluster.web("web", port=self.port, tls=self.acme_tls, access_log=True)
        self.cluster.worker("worker")

    def stop(self) -> None:
        self.cluster.destroy()
        self.sites.stop()

    def another_web(self, name: str, env: dict[str, str] | None = None) -> int:
        """Another web process of the same deployment (its port): Acme behind a balancer;
        ``env``: the example project's environment switches for it alone."""
        port = free_port()
        self.cluster.web(name, port=port, tls=self.acme_tls, access_log=True, env=env)
        self.services.append(name)
        return port

    def routes(self, acme_port: int | None = None) -> dict[str, int]:
        return {
            DOMAIN: acme_port or self.port,
            **{i.domain: self.sites.port for i in self.identities},
        }

    def client(self, *, acme_port: int | None = None, **kwargs: Any) -> httpx.AsyncClient:
        """An HTTPS client on the test network (a personal agent's, or a person's browser);
        ``acme_port``: which of Acme's web processes it reaches."""
        transport = RoutedAsyncTransport(self.routes(acme_port), self.authority.context())
        return httpx.AsyncClient(transport=transport, timeout=40.0, **kwargs)

    async def resolve(self, host: str) -> list[str]:
        """The personal agent's resolver: a public address for the names on the network."""
        if host not in self.routes():
            raise OSError(f"{host} does not resolve")
        return [PUBLIC_ADDRESS]

    def log_problems(self) -> list[str]:
        """Every 5xx answer and traceback in the services' logs."""
        problems = []
        for name in self.services:
            for line in (self.tmp / f"{name}.log").read_text(errors="replace").splitlines():
                if _SERVER_ERROR.search(line) or "Traceback" in line:
                    problems.append(f"{name}: {line}")
        return problems

    def manage(self, *args: str) -> str:
        return self.cluster.manage(*args)

    def emailed_code(self, account: str) -> str:
        """The last Mediated Sign-In code Acme e-mailed to ``account``'s user at
        ``<account>@example.com`` (the demo's outbox: one file a message)."""
        address = f"To: {account}@example.com"
        mails = sorted((self.tmp / "outbox").glob("*.log"), key=lambda path: path.stat().st_mtime)
        for mail in reversed(mails):
            text = mail.read_text(errors="replace")
            if address in text:
                found = _EMAILED_CODE.findall(text)
                assert found, text
                return str(found[-1])
        raise AssertionError(f"no code was e-mailed to {account}")


#: The operator's shell: each line it reads is one JSON command, answered with one line
#: ``done <JSON>``. ``forget``: a conversation's events but its newest, as the SDK's reference
#: Company forgets them for the suite (``forget_events(..., keep=1)``), in the order the
#: product prunes (the cursors into them marked expired first, then the rows: a reader sees
#: "expired", never a gap). Pruning by age (``poppy_prune_events --older-than 0s``) raced the
#: suite's turn: once its reply had landed, nothing was left for a reader to resume from
#: (``cursor-expired-recovery`` timed out on a loaded machine). ``revise``: the company
#: changes a proposal (``operations.service.revise``, what staff or a hook call);
#: ``performed``: how many runs of an operation's action the product recorded (its
#: ``attempts`` once it has an outcome: each run's effect and outcome commit together, so a
#: second run would show as 2).
_OPERATOR_SHELL = """
import json
import sys
from django.db import transaction
from django.db.models import Max
from poppy_django.models import Event
from poppy_django.operations import service
from poppy_django.store.event_log import expire_before
from poppy_django.operations.models import Operation, OperationState

FINAL = (OperationState.SUCCEEDED, OperationState.FAILED)
for line in sys.stdin:
    command = json.loads(line)
    if command["do"] == "forget":
        events = Event.objects.filter(conversation_id=command["conversation_id"])
        with transaction.atomic():
            newest = events.aggregate(seq=Max("seq"))["seq"] or 0
            expire_before(command["conversation_id"], newest)
            answer, _ = events.filter(seq__lt=newest).delete()
    elif command["do"] == "revise":
        answer = service.revise(command["operation_id"], summary=command["summary"]).revision
    else:
        operation = Operation.objects.get(pk=command["operation_id"])
        answer = operation.attempts if operation.state in FINAL else 0
    print("done", json.dumps(answer), flush=True)
"""


class Operator:
    """Acme's operator at a ``manage.py shell`` kept open in the deployment's environment, so
    a command runs at once (a new ``manage.py`` process takes seconds to start, by when the
    suite's turn has answered)."""

    def __init__(self, acme: ShippedAcme) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "shell", "-v", "0", "-c", _OPERATOR_SHELL],
            env=acme.cluster.env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lock = threading.Lock()

    def _run(self, **command: str) -> Any:
        with self.lock:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps(command) + "\n")
            self.process.stdin.flush()
            while True:  # past what the shell itself prints at start
                line = self.process.stdout.readline()
                if not line:
                    raise RuntimeError("the operator's shell exited")
                if line.startswith("done "):
                    return json.loads(line.removeprefix("done "))

    def forget(self, conversation_id: str) -> int:
        """Forget the conversation's events but its newest, now; how many went."""
        return int(self._run(do="forget", conversation_id=conversation_id))

    def revise(self, operation_id: str, summary: str) -> int:
        """The company revises a proposal (shown to the User as ``summary``); its revision."""
        return int(self._run(do="revise", operation_id=operation_id, summary=summary))

    def performed(self, operation_id: str) -> int:
        """How many times the operation's action was run to an outcome."""
        return int(self._run(do="performed", operation_id=operation_id))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


@contextlib.contextmanager
def shipped_acme(
    tmp: Path, identities: list[AgentIdentity], env: dict[str, str] | None = None
) -> Iterator[ShippedAcme]:
    """Acme running for the block; ``env``: more of the environment of the processes it
    starts on its migrated database (a test's settings module:
    :mod:`tests.authority.shipped_fast_hashing`)."""
    running = ShippedAcme(tmp, identities, env)
    try:
        running.start()
        yield running
    finally:
        running.stop()
