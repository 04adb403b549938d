"""Personal-agent clients: their metadata fetched safely and cached, and the staff's say.

A client is allowed unless staff blocked it; with ``POPPY_AUTHORITY["CLIENTS"] =
"registered"`` only pre-registered clients are. A pre-registered client whose metadata and
JWKS staff stored is never fetched.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.utils import timezone

from poppy_django.auth.jwk import JWKError, PublicKey, public_key_for
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.errors import UnauthorizedClient
from poppy_django.authority.fetch import FetchError, fetch_json
from poppy_django.authority.models import Client

logger = logging.getLogger("poppy_django.authority")

#: Private or symmetric key members: a JWKS that carries one is refused outright.
_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
#: A kid missing from a cached JWKS triggers a refetch at most this often (key rotation).
REFETCH_AFTER = timedelta(seconds=60)


class ClientRefused(UnauthorizedClient):
    """The client is unknown, blocked, or its metadata cannot be used."""


def _https_same_host(url: Any, host: str) -> bool:
    if not isinstance(url, str):
        return False
    parts = urlsplit(url)
    return parts.scheme == "https" and parts.hostname == host and not parts.username


def validate_metadata(client_id: str, metadata: dict[str, Any]) -> None:
    """Client metadata as Poppy draft 0.2 §4.1 has it; :class:`FetchError` otherwise."""
    host = urlsplit(client_id).hostname or ""
    if metadata.get("client_id") != client_id:
        raise FetchError("the metadata names another client_id")
    if not _https_same_host(metadata.get("jwks_uri"), host):
        raise FetchError("jwks_uri is not an https URL on the client_id's host")
    redirect_uris = metadata.get("redirect_uris", [])
    if not isinstance(redirect_uris, list) or not all(
        _https_same_host(uri, host) for uri in redirect_uris
    ):
        raise FetchError("redirect_uris are not https URLs on the client_id's host")
    method = metadata.get("token_endpoint_auth_method", "private_key_jwt")
    if method != "private_key_jwt":
        raise FetchError("token_endpoint_auth_method is not private_key_jwt")


def validate_jwks(jwks: dict[str, Any]) -> None:
    keys = jwks.get("keys")
    if not isinstance(keys, list) or not keys:
        raise FetchError("the JWKS has no keys")
    for key in keys:
        if not isinstance(key, dict) or _PRIVATE_MEMBERS.intersection(key):
            raise FetchError("the JWKS holds a private or symmetric key")


def _refresh(client: Client) -> None:
    metadata = fetch_json(client.client_id)
    validate_metadata(client.client_id, metadata)
    jwks = fetch_json(metadata["jwks_uri"])
    validate_jwks(jwks)
    client.metadata = metadata
    client.jwks = jwks
    client.fetched_at = timezone.now()
    name = metadata.get("client_name")
    if isinstance(name, str) and name and not client.name:
        client.name = name[:200]
    client.save(update_fields=["metadata", "jwks", "fetched_at", "name"])


def _stored_by_staff(client: Client) -> bool:
    return client.registered and client.fetched_at is None and bool(client.jwks.get("keys"))


def _stale(client: Client) -> bool:
    if _stored_by_staff(client):
        return False
    if client.fetched_at is None:
        return True
    max_age = timedelta(seconds=float(authority_settings().CLIENT_METADATA_CACHE_SECONDS))
    return timezone.now() - client.fetched_at > max_age


def client_for(client_id: Any) -> Client:
    """The allowed :class:`Client` for ``client_id``, its metadata current; else refused."""
    if not isinstance(client_id, str) or not client_id or len(client_id) > 512:
        raise ClientRefused("The client is not identified.")
    parts = urlsplit(client_id)
    if parts.scheme != "https" or not parts.hostname or parts.fragment or parts.username:
        raise ClientRefused("A client_id is an https URL.")
    client = Client.objects.filter(client_id=client_id).first()
    registered_only = authority_settings().CLIENTS == "registered"
    if client is None:
        if registered_only:
            raise ClientRefused("The client is not registered with this company.")
        # get_or_create: two first requests of one client at once make one row.
        client, _ = Client.objects.get_or_create(client_id=client_id)
    if client.status != Client.Status.ALLOWED:
        raise ClientRefused("The client is not allowed at this company.")
    if registered_only and not client.registered:
        raise ClientRefused("The client is not registered with this company.")
    if _stale(client):
        try:
            _refresh(client)
        except FetchError as exc:
            logger.info("Client metadata of %s refused: %s", client_id, exc)
            raise ClientRefused("The client's metadata could not be used.") from None
    return client


def client_key(client: Client, kid: Any, alg: str) -> PublicKey | None:
    """The client's public key for ``kid`` and ``alg`` (refetching once for a rotated key)."""
    key = _find_key(client.jwks, kid, alg)
    if key is None and not _stored_by_staff(client):
        fetched = client.fetched_at
        if fetched is None or timezone.now() - fetched > REFETCH_AFTER:
            try:
                _refresh(client)
            except FetchError:
                return None
            key = _find_key(client.jwks, kid, alg)
    return key


def _find_key(jwks: dict[str, Any], kid: Any, alg: str) -> PublicKey | None:
    for jwk in jwks.get("keys") or []:
        if not isinstance(jwk, dict) or (kid is not None and jwk.get("kid") != kid):
            continue
        if jwk.get("alg") not in (None, alg) or jwk.get("use") not in (None, "sig"):
            continue
        try:
            return public_key_for(jwk, alg)
        except JWKError:
            continue
    return None
