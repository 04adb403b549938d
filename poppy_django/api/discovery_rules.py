"""The draft's rules for ``poppy.json`` and the issuer's OAuth metadata, as personal agents
apply them (Poppy draft 0.2 §3.1-3.2), so a project cannot publish a document they refuse.

Each rule broken is a :class:`Problem` naming the field (``apis.0.description``) and the
fix. The rules are those of the public SDK's discovery models (its ``DiscoveryDocument`` and
``OAuthServerMetadata``), written out here: the package never imports the SDK. The check
runs with ``DEBUG`` off, where a document is published; development (often over plain http,
with no organization name yet) is not stopped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

#: The ``protocol_version`` values personal agents use a document of (before 1.0, exactly).
SUPPORTED_PROTOCOL_VERSIONS = frozenset({"0.2"})
#: The DPoP algorithm every company accepts: a published list includes it.
REQUIRED_DPOP_ALGORITHM = "ES256"
_VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
_EXTENSION_VERSION = re.compile(r"^(0|[1-9][0-9]*)$")
_DOMAIN = re.compile(
    r"^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
)


@dataclass(frozen=True)
class Problem:
    """One broken rule: where (a dotted path), what, and how to fix it."""

    field: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _text(document: dict[str, Any], key: str, where: str, fix: str) -> Iterator[Problem]:
    value = document.get(key)
    if not isinstance(value, str) or not value:
        yield Problem(f"{where}{key}", "required, a non-empty string", fix)


def _url(value: Any, field: str, fix: str, *, required: bool = True) -> Iterator[Problem]:
    if value is None and not required:
        return
    if not isinstance(value, str):
        yield Problem(field, "required, an https URL", fix)
        return
    parts = urlsplit(value)
    if not parts.hostname or parts.username or parts.password:
        yield Problem(field, f"{value!r} is not a URL with a host and no user information", fix)
    elif parts.scheme != "https":
        yield Problem(
            field,
            f"{value} is not https: personal agents refuse it",
            'Serve the project over TLS and set POPPY["BASE_URL"] (and POPPY["ISSUER"]) to '
            "its https origin.",
        )


#: RFC 6761 §6.3: ``localhost`` and the names under it are the loopback's, resolved on the
#: machine itself (a browser does; the OS's resolver may need them in /etc/hosts).
LOOPBACK_NAME = "localhost"


def is_domain(value: Any) -> bool:
    """A DNS name: two labels at least, or ``localhost`` (``*.localhost`` have two)."""
    if not isinstance(value, str):
        return False
    name = value.rstrip(".").lower()
    return name == LOOPBACK_NAME or bool(_DOMAIN.fullmatch(name))


def _scope_option(value: Any, field: str) -> Iterator[Problem]:
    if value is None:
        return
    scopes = value.get("scopes", []) if isinstance(value, dict) else None
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        yield Problem(f"{field}.scopes", "a list of scope strings", "List the scopes offered.")


def _auth(auth: Any) -> Iterator[Problem]:
    if not isinstance(auth, dict):
        yield Problem("auth", "required (an object)", 'Set POPPY["ISSUER"].')
        return
    yield from _url(auth.get("issuer"), "auth.issuer", 'Set POPPY["ISSUER"] to its https URL.')
    for method in ("direct", "device"):
        yield from _scope_option(auth.get(method), f"auth.{method}")
    mediated = auth.get("mediated")
    if mediated is not None:
        yield from _scope_option(mediated, "auth.mediated")
        endpoint = mediated.get("endpoint") if isinstance(mediated, dict) else None
        yield from _url(endpoint, "auth.mediated.endpoint", "Give the mediated endpoint.")
        fields = mediated.get("fields") if isinstance(mediated, dict) else None
        if not isinstance(fields, list) or not fields:
            yield Problem("auth.mediated.fields", "at least one field", "List the form fields.")
        else:
            for i, entry in enumerate(fields):
                where = f"auth.mediated.fields.{i}."
                entry = entry if isinstance(entry, dict) else {}
                yield from _text(entry, "name", where, "Name the field.")
                yield from _text(entry, "label", where, "Label the field.")
                if not isinstance(entry.get("secret"), bool):
                    yield Problem(
                        where + "secret",
                        "required, true or false",
                        "Say whether the field is a secret.",
                    )
    custom = auth.get("custom_scopes", {})
    if not isinstance(custom, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in custom.items()
    ):
        yield Problem(
            "auth.custom_scopes",
            "an object of scope -> description",
            'Set POPPY_AUTHORITY["CUSTOM_SCOPES"] = {"scope": "What it allows"}.',
        )


def _apis(apis: Any) -> Iterator[Problem]:
    if not isinstance(apis, list):
        yield Problem("apis", "a list", 'POPPY["DISCOVERY"]["APIS"] is a list of objects.')
        return
    for i, api in enumerate(apis):
        where = f"apis.{i}."
        api = api if isinstance(api, dict) else {}
        yield from _text(api, "type", where, 'Give the API a "type" (e.g. "openapi").')
        yield from _url(api.get("url"), where + "url", "Give the API's description URL.")
        yield from _text(
            api,
            "description",
            where,
            f'Add "description" (what the API offers a personal agent) to '
            f'POPPY["DISCOVERY"]["APIS"][{i}].',
        )
        yield from _url(
            api.get("resource"),
            where + "resource",
            f'Make POPPY["DISCOVERY"]["APIS"][{i}]["resource"] an https URL, or remove it.',
            required=False,
        )


def _agent(agent: Any) -> Iterator[Problem]:
    protocols = agent.get("protocols") if isinstance(agent, dict) else None
    if not isinstance(protocols, list) or not protocols:
        yield Problem("agent.protocols", "at least one protocol", "List the endpoint.")
        return
    for i, entry in enumerate(protocols):
        where = f"agent.protocols.{i}."
        entry = entry if isinstance(entry, dict) else {}
        yield from _text(entry, "type", where, 'Give the protocol a "type".')
        yield from _url(entry.get("endpoint"), where + "endpoint", 'Set POPPY["BASE_URL"].')
        yield from _url(
            entry.get("resource"), where + "resource", "Make it an https URL.", required=False
        )


def _extensions(extensions: Any) -> Iterator[Problem]:
    if not isinstance(extensions, dict):
        yield Problem("extensions", "an object", "Give extensions as name -> {version}.")
        return
    for name, entry in extensions.items():
        version = entry.get("version") if isinstance(entry, dict) else None
        if not isinstance(version, str) or not _EXTENSION_VERSION.fullmatch(version):
            yield Problem(
                f"extensions.{name}.version",
                'a major version such as "1"',
                f'Give extension {name!r} its major version as a string in POPPY["DISCOVERY"].',
            )


def discovery_problems(document: dict[str, Any], served_by: str | None) -> list[Problem]:
    """What a personal agent refuses in ``poppy.json`` served by the host ``served_by``."""
    problems: list[Problem] = []
    version = document.get("protocol_version")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        problems.append(Problem("protocol_version", "required, major.minor", 'Leave it at "0.2".'))
    elif version not in SUPPORTED_PROTOCOL_VERSIONS:
        problems.append(
            Problem(
                "protocol_version",
                f"{version} is not a version personal agents use "
                f"({', '.join(sorted(SUPPORTED_PROTOCOL_VERSIONS))})",
                'Remove POPPY["DISCOVERY"]["PROTOCOL_VERSION"] (the default is "0.2").',
            )
        )
    organization = document.get("organization")
    if not isinstance(organization, dict):
        problems.append(
            Problem("organization", "required", 'Set POPPY["DISCOVERY"]["ORGANIZATION"].')
        )
        organization = {}
    problems += _text(
        organization, "name", "organization.", 'Set POPPY["DISCOVERY"]["ORGANIZATION"]["name"].'
    )
    domain = organization.get("domain")
    if not is_domain(domain):
        problems.append(
            Problem(
                "organization.domain",
                f"{domain!r} is not a DNS name",
                'Set POPPY["DISCOVERY"]["ORGANIZATION"]["domain"] to the host serving it.',
            )
        )
    elif served_by and str(domain).rstrip(".").lower() != served_by.lower():
        problems.append(
            Problem(
                "organization.domain",
                f"{domain} is not the host serving the document ({served_by}): agents refuse it",
                'Set POPPY["BASE_URL"] to that domain\'s origin, or the domain to the host.',
            )
        )
    agent, apis, web = document.get("agent"), document.get("apis", []), document.get("web")
    if agent is not None:
        problems += _agent(agent)
    problems += _apis(apis)
    if web is not None:
        endpoint = web.get("browser_session_endpoint") if isinstance(web, dict) else None
        problems += _url(
            endpoint, "web.browser_session_endpoint", "Make it an https URL.", required=False
        )
    if document.get("feedback") is not None:
        feedback = document["feedback"]
        endpoint = feedback.get("endpoint") if isinstance(feedback, dict) else None
        problems += _url(endpoint, "feedback.endpoint", "Give the feedback endpoint.")
    problems += _extensions(document.get("extensions", {}))
    if agent is None and not apis and web is None:
        problems.append(
            Problem(
                "agent",
                "one of agent, apis or web is required",
                'Leave agent in (the default) or list POPPY["DISCOVERY"]["APIS"].',
            )
        )
    if agent is not None or apis or document.get("feedback") is not None:
        if document.get("auth") is None:
            problems.append(Problem("auth", "required", 'Set POPPY["ISSUER"].'))
        else:
            problems += _auth(document["auth"])
    return problems


def metadata_problems(metadata: dict[str, Any], document: dict[str, Any]) -> list[Problem]:
    """What a personal agent refuses in the issuer's RFC 8414 metadata, for ``document``."""
    problems: list[Problem] = []
    for name in ("issuer", "token_endpoint", "revocation_endpoint"):
        problems += _url(metadata.get(name), name, "The authority advertises it.")
    for name in ("authorization_endpoint", "device_authorization_endpoint"):
        problems += _url(
            metadata.get(name), name, 'Set POPPY["BASE_URL"] to the https origin.', required=False
        )
    found = document.get("auth")
    auth: dict[str, Any] = found if isinstance(found, dict) else {}
    if auth.get("issuer") and metadata.get("issuer") != auth.get("issuer"):
        problems.append(
            Problem(
                "issuer",
                f"{metadata.get('issuer')!r} is not poppy.json's auth.issuer "
                f"{auth.get('issuer')!r} character for character",
                'Set POPPY["ISSUER"] once; both documents take it from there.',
            )
        )
    domains = metadata.get("poppy_domains")
    organization = document.get("organization") or {}
    if not isinstance(domains, list) or not domains or not all(map(is_domain, domains)):
        problems.append(
            Problem("poppy_domains", "at least one DNS name", 'Set POPPY_AUTHORITY["DOMAINS"].')
        )
    elif str(organization.get("domain", "")).lower() not in [d.lower() for d in domains]:
        problems.append(
            Problem(
                "poppy_domains",
                f"does not list poppy.json's organization domain {organization.get('domain')}",
                'Add it to POPPY_AUTHORITY["DOMAINS"] (or leave DOMAINS unset).',
            )
        )
    algorithms = metadata.get("dpop_signing_alg_values_supported")
    if algorithms is not None and REQUIRED_DPOP_ALGORITHM not in algorithms:
        problems.append(
            Problem(
                "dpop_signing_alg_values_supported",
                f"does not include {REQUIRED_DPOP_ALGORITHM}",
                f'Keep {REQUIRED_DPOP_ALGORITHM} in POPPY["TOKENS"]["DPOP_ALGORITHMS"].',
            )
        )
    return problems
