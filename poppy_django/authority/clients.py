"""Personal-agent clients: their metadata fetched safely and cached, and the staff's say.

A client is allowed unless staff blocked it; with ``POPPY_AUTHORITY["CLIENTS"] =
"registered"`` only pre-registered clients are. A pre-registered client whose metadata and
JWKS staff stored is never fetched.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.core.cache import caches
from django.utils import timezone

from poppy_django.authority.conf import authority_settings
from poppy_django.authority.errors import UnauthorizedClient
from poppy_django.authority.fetch import FetchError, fetch_json
from poppy_django.authority.models import Client
from poppy_django.verifier.jwk import JWKError, PublicKey, public_key_for

logger = logging.getLogger("poppy_django.authority")

#: Private or symmetric key members: a JWKS that carries one is refused outright.
_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
#: A kid missing from a cached JWKS triggers a refetch at most this often (key rotation).
REFETCH_AFTER = timedelta(seconds=60)
#: Cache keys: a client whose metadata failed lately, and the fetches per host this minute.
FAILED_PREFIX = "poppy:authority:client-failed:"
FETCH_RATE_PREFIX = "poppy:authority:fetches:"
#: What a client_id may hold: printable ASCII URL characters, no "%" (no percent-encoding).
_URL_TEXT = re.compile(r"[A-Za-z0-9\-._~:/@!$&'()*+,;=]+")
#: A host name in lower case: dot-separated labels of letters, digits and hyphens.
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}")


class ClientRefused(UnauthorizedClient):
    """The client is unknown, blocked, or its metadata cannot be used."""


class FetchLimited(FetchError):
    """This host's fetches are used up for the minute (``FETCHES_PER_HOST_PER_MINUTE``)."""


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


def normal_client_id(value: Any) -> str | None:
    """``value`` if it is a client_id in normal form, else None.

    Staff block a client by its id, so one client must have one spelling: https in lower
    case, a lower-case host without a trailing dot, no port but a non-default one, no user
    information, query, fragment or percent-encoding, and a path of non-empty segments
    that are not ``.`` or ``..`` and does not end in ``/``. Anything else (``?v=2``, a
    trailing ``/``, ``HTTPS://``, ``:443``, a NUL) is refused rather than normalized.
    """
    if not isinstance(value, str) or not 0 < len(value) <= 512 or not _URL_TEXT.fullmatch(value):
        return None
    try:
        parts = urlsplit(value)
        host, port = parts.hostname, parts.port
    except ValueError:  # malformed brackets or port
        return None
    if parts.scheme != "https" or not host or not _HOST.fullmatch(host):
        return None
    authority = host if port in (None, 443) else f"{host}:{port}"
    segments = parts.path.split("/")[1:]
    if (
        parts.netloc != authority
        or not parts.path.startswith("/")
        or any(segment in ("", ".", "..") for segment in segments)
        or f"https://{authority}{parts.path}" != value
    ):
        return None
    return value


def _cache() -> Any:
    return caches[str(authority_settings().REPLAY_CACHE)]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _failed_recently(client_id: str) -> bool:
    return _cache().get(FAILED_PREFIX + _digest(client_id)) is not None


def _remember_failure(client_id: str) -> None:
    seconds = authority_settings().CLIENT_FAILURE_CACHE_SECONDS
    if seconds:
        _cache().set(FAILED_PREFIX + _digest(client_id), 1, timeout=float(seconds))


def _may_fetch(url: str) -> bool:
    """Count a fetch from ``url``'s host; False past ``FETCHES_PER_HOST_PER_MINUTE``."""
    limit = authority_settings().FETCHES_PER_HOST_PER_MINUTE
    if limit is None:
        return True
    cache, key = _cache(), FETCH_RATE_PREFIX + _digest(urlsplit(url).hostname or "")
    cache.add(key, 0, timeout=60)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=60)
        count = 1
    return int(count) <= int(limit)


def _fetch(url: str) -> dict[str, Any]:
    if not _may_fetch(url):
        raise FetchLimited("too many fetches from this host this minute")
    return fetch_json(url)


def _refresh(client: Client) -> None:
    """Fetch the client's metadata and JWKS; saved if the client is stored already."""
    metadata = _fetch(client.client_id)
    validate_metadata(client.client_id, metadata)
    jwks = _fetch(metadata["jwks_uri"])
    validate_jwks(jwks)
    client.metadata = metadata
    client.jwks = jwks
    client.fetched_at = timezone.now()
    name = metadata.get("client_name")
    if isinstance(name, str) and name and not client.name:
        client.name = name[:200]
    if client.pk is not None:
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
    """The allowed :class:`Client` for ``client_id``, its metadata current; else refused.

    A client not seen before comes back unsaved (``pk`` None): nothing is stored for a
    caller that has not proven to be the client. Store it with :func:`remember` once it
    has authenticated (or its User approved it). A client whose metadata could not be
    used is refused unfetched for ``CLIENT_FAILURE_CACHE_SECONDS``.
    """
    if normal_client_id(client_id) is None:
        raise ClientRefused("A client_id is an https URL in normal form.")
    assert isinstance(client_id, str)
    client = Client.objects.filter(client_id=client_id).first()
    registered_only = authority_settings().CLIENTS == "registered"
    if client is None:
        if registered_only:
            raise ClientRefused("The client is not registered with this company.")
        client = Client(client_id=client_id)
    if client.status != Client.Status.ALLOWED:
        raise ClientRefused("The client is not allowed at this company.")
    if registered_only and not client.registered:
        raise ClientRefused("The client is not registered with this company.")
    if _stale(client):
        if _failed_recently(client_id):
            raise ClientRefused("The client's metadata could not be used.")
        try:
            _refresh(client)
        except FetchLimited:
            if client.pk is None or not client.jwks.get("keys"):
                raise ClientRefused("The client's metadata cannot be fetched now.") from None
            logger.info("Client metadata of %s not refreshed: fetches limited", client_id)
        except FetchError as exc:
            logger.info("Client metadata of %s refused: %s", client_id, exc)
            _remember_failure(client_id)
            raise ClientRefused("The client's metadata could not be used.") from None
    return client


def remember(client: Client) -> Client:
    """Store a client that proved itself (its assertion verified, or its User approved).

    Two first requests of one client at once store one row (``get_or_create``).
    """
    if client.pk is not None:
        return client
    stored, _ = Client.objects.get_or_create(
        client_id=client.client_id,
        defaults={
            "metadata": client.metadata,
            "jwks": client.jwks,
            "fetched_at": client.fetched_at,
            "name": client.name,
        },
    )
    return stored


def client_key(client: Client, kid: Any, alg: str) -> PublicKey | None:
    """The client's public key for ``kid`` and ``alg`` (refetching once for a rotated key)."""
    key = _find_key(client.jwks, kid, alg)
    if key is None and not _stored_by_staff(client):
        fetched = client.fetched_at
        if fetched is None or timezone.now() - fetched > REFETCH_AFTER:
            try:
                _refresh(client)
            except FetchError as exc:
                logger.info("Client keys of %s not refreshed: %s", client.client_id, exc)
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
