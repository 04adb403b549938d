"""The reference Company of ``personal-agent-protocol`` 0.26 under uvicorn, for bench/latency.py.

Runs with the *separate* venv's Python (never imported by poppy-django; nothing of the
package is copied here)::

    var/bench/ref-venv/bin/python bench/ref_company.py --port P --users 33 --creds FILE \
        [--postgres DSN [--pool-size 10] [--replicas 2]]

With ``--postgres`` the company keeps its state in PostgreSQL through ``bench/pg_store.py``
(issue 28's peer: the SDK's own Company made durable); without, in the SDK's default
``MemoryCompanyStore``. ``--replicas N`` (PostgreSQL only) runs N processes of it over the
one store, as the SDK's design allows ("building it again over the same store is Manzanita
restarted, or another replica of it"): this one seeds the store and writes the credentials,
then starts N - 1 children with ``--replica``, which build the company over the store as it
is; all listen on the one port (``SO_REUSEPORT``), so the kernel spreads the clients'
connections over them, as a load balancer in front of replicas would.

What it does, as the package's own tests do (``World.signed_out_session`` in
``__tests__/test_company_end_to_end.py``): builds its demo company, Manzanita Outfitters
(``personal_agent_protocol.demo.manzanita``), on an in-process network next to a personal
agent identity (``demo.kit.AgentIdentity``), discovers the company and starts one signed-out
Session per bench user over the real token endpoint (client assertion + DPoP), seeds
conversations of the requested sizes straight into the company's store, writes each
user's Session Token, DPoP private key (PEM) and conversation ids to ``--creds``, then serves
the very same ``company_app(service)`` with uvicorn on ``127.0.0.1:--port``. The clock is
the real one (the demo's ``MutableClock`` is frozen), so proofs signed with ``time.time()``
are inside its acceptance window. It exits after ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn
from cryptography.hazmat.primitives import serialization
from personal_agent_protocol import DiscoveryClient, SessionClient
from personal_agent_protocol.company.store import CONVERSATION, StoredConversation, StoredEvent
from personal_agent_protocol.crypto import JoseDpopProofProvider
from personal_agent_protocol.demo.kit import (
    AgentIdentity,
    DpopKeys,
    InProcessNetwork,
    MemoryVault,
    ScriptedInput,
)
from personal_agent_protocol.demo.manzanita import DOMAIN, manzanita
from personal_agent_protocol.operations import (
    STANDING_PERMISSION_STORES,
    InMemoryStandingPermissionStore,
)
from personal_agent_protocol.reactor import (
    AUTHORIZATION_STATE_STORES,
    CLOCKS,
    DPOP_PROOF_PROVIDERS,
    PROTECTED_INPUTS,
    SIGNERS,
    TOKEN_STORES,
    build_pap_reactor,
)
from reactor import PluginManifest  # type: ignore[import-untyped]

TENANT = "bench"
ROOT = Path(__file__).resolve().parent.parent


class RealClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class BenchAgentHost:
    """The personal agent's contributions (as ``demo.kit.PersonalAgentHost``), keeping the
    DPoP keys reachable so the bench client can sign its own proofs with them."""

    def __init__(self, identity: AgentIdentity, clock: RealClock) -> None:
        self.identity = identity
        self.clock = clock
        self.keys = DpopKeys()
        self.vault = MemoryVault()

    def provide_contributions(self, contributions: Any) -> None:
        contribute = contributions.contribute
        contribute(CLOCKS, self.clock, contribution_id="clock")
        contribute(SIGNERS, self.identity.signer(), contribution_id="agent-key")
        contribute(
            DPOP_PROOF_PROVIDERS,
            JoseDpopProofProvider(self.keys, now=self.clock.now),
            contribution_id="dpop-keys",
        )
        contribute(TOKEN_STORES, self.vault, contribution_id="vault")
        contribute(AUTHORIZATION_STATE_STORES, self.vault, contribution_id="vault")
        contribute(PROTECTED_INPUTS, ScriptedInput(), contribution_id="input")
        contribute(
            STANDING_PERMISSION_STORES,
            InMemoryStandingPermissionStore(),
            contribution_id="standing",
        )


def seeded(service: Any, owner: tuple[str, str], size: int) -> StoredConversation:
    """A conversation of ``size`` events shaped like real turns (message, working, reply, idle)."""
    events: list[StoredEvent] = []
    turn = 0
    while len(events) < size:
        turn += 1
        shapes: list[dict[str, Any]] = [
            {
                "type": "message",
                "message": {
                    "id": f"seed_{turn}",
                    "sender": "agent",
                    "text": f"hello {turn}",
                    "role": "user",
                },
            },
            {"type": "state", "status": "working", "responder": "agent"},
            {
                "type": "message",
                "message": {
                    "id": service._id("msg"),
                    "sender": "agent",
                    "role": "company",
                    "text": "Hello from Manzanita Outfitters. Ask me about an order.",
                },
            },
            {"type": "state", "status": "idle", "responder": "agent"},
        ]
        for shape in shapes[: size - len(events)]:
            events.append(service._event(**shape))
    return StoredConversation(conversation_id=service._id("cnv"), owner=owner, events=tuple(events))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--users", type=int, default=33)
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--creds", required=True)
    parser.add_argument("--max-seconds", type=float, default=1800)
    parser.add_argument("--postgres", help="keep the company's state in this database")
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=1, help="processes over the one store")
    parser.add_argument("--replica", action="store_true", help="serve the store as it is")
    args = parser.parse_args()
    if args.replicas > 1 and not args.postgres:
        parser.error("--replicas needs --postgres: replicas share the store")

    clock = RealClock()
    network = InProcessNetwork()
    atlas = AgentIdentity(domain="atlas.example", name="Atlas")
    network.add(atlas.domain, atlas.website())
    store = None
    if args.postgres:
        sys.path.insert(0, str(ROOT))
        from bench.pg_store import PostgresCompanyStore

        store = PostgresCompanyStore(args.postgres, pool_size=args.pool_size, now=clock.now)
        if not args.replica:
            await store.create_schema()
            await store.clear()
    service, _plugin = manzanita(network, clock, store=store)  # type: ignore[arg-type]
    if args.replica:
        await serve(network.apps[DOMAIN], args.port, args.max_seconds)
        return
    http = network.client()
    host = BenchAgentHost(atlas, clock)
    reactor, _ = build_pap_reactor(
        http_client=http,
        address_resolver=network.resolve,
        plugins=[(PluginManifest(name="bench-agent-host", version="1"), host)],
    )
    company = await DiscoveryClient(reactor=reactor, http_client=http).discover(DOMAIN)
    oauth = company.oauth_metadata
    assert oauth is not None and company.document.agent is not None
    endpoint = company.document.agent.protocols[0].endpoint
    sizes = [int(size) for size in args.sizes.split(",") if size]
    users = []
    for number in range(args.users):
        pairwise = f"usr_bench_{number:04d}_000000000000"
        token = await SessionClient(reactor=reactor, http_client=http).start(
            client_id=atlas.client_id,
            pairwise_user_id=pairwise,
            issuer=oauth.issuer,
            token_endpoint=oauth.token_endpoint,
            tenant_id=TENANT,
        )
        material = host.keys.keys[(TENANT, pairwise, oauth.issuer)]
        pem = material.private_key.private_bytes(  # type: ignore[union-attr]
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        conversations = {}
        for size in sizes:
            conversation = seeded(service, (atlas.client_id, pairwise), size)
            await service.store.put(
                CONVERSATION, conversation.conversation_id, conversation.to_json()
            )
            conversations[str(size)] = {
                "id": conversation.conversation_id,
                "events": [event.id for event in conversation.events[-8:]],
            }
        users.append(
            {
                "user": pairwise,
                "token": token.access_token.get_secret_value(),
                "token_type": token.token_type,
                "dpop_key_pem": pem,
                "conversations": conversations,
            }
        )
    replicas = [
        subprocess.Popen([sys.executable, *sys.argv, "--replica"]) for _ in range(args.replicas - 1)
    ]
    try:
        # The replicas listen before the credentials say the company is ready.
        await asyncio.sleep(3 if replicas else 0)
        with open(args.creds, "w") as out:
            json.dump({"endpoint": endpoint, "users": users}, out)
        await serve(network.apps[DOMAIN], args.port, args.max_seconds)
    finally:
        for replica in replicas:
            replica.terminate()
            replica.wait()


async def serve(app: Any, port: int, max_seconds: float) -> None:
    """Serve ``app`` on a port other processes may listen on too, for ``max_seconds``."""
    # IPPROTO_TCP named, as asyncio checks it before it sets TCP_NODELAY on each connection
    # (with proto 0 every small response waits out the client's delayed ACK, ~40 ms).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    listener.bind(("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    serving = asyncio.ensure_future(server.serve(sockets=[listener]))
    done, _ = await asyncio.wait({serving}, timeout=max_seconds)
    if not done:
        server.should_exit = True
        await serving


if __name__ == "__main__":
    asyncio.run(main())
