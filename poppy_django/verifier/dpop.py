"""The default verifier: DPoP-bound JWT Session Tokens (RFC 9449, RFC 7638, RFC 6750).

``POPPY = {"AUTHENTICATE": "poppy_django.verifier.dpop.verify", "ISSUER": ..., "TOKENS": {...}}``
(sub-keys in :mod:`poppy_django.token_options`). A request is accepted only when:

- ``Authorization: DPoP <token>`` (a Bearer token is refused: a DPoP-bound token sent as
  Bearer could be a stolen one) and one ``DPoP`` proof, both within their size limits;
- the proof: ``typ`` ``dpop+jwt``, an allowed asymmetric ``alg``, a public ``jwk`` that fits
  it, a valid signature, ``htm`` = the method, ``htu`` = the public URL (query and fragment
  ignored, scheme/host/port normalized), ``iat`` in the window, ``ath`` = the token's hash,
  a current server nonce when ``REQUIRE_NONCE``, and a ``jti`` never seen before;
- the token: an allowed ``alg``, signed by an issuer key (by ``kid``), ``iss`` = the issuer,
  ``aud`` naming the endpoint, ``exp``/``nbf``/``iat`` within leeway, ``cnf.jkt`` = the
  proof key's thumbprint, a client id and User, and (``POPPY["SESSION_STATUS"]``) a session
  that has not ended;
- every number in either is finite (Python's JSON reads ``NaN``, which no comparison stops).

The checks live by what they check: the proof (:mod:`~poppy_django.verifier.proof`), the
Session Token (:mod:`~poppy_django.verifier.session_token`), what both share
(:mod:`~poppy_django.verifier.claims`) and the two bounded caches that keep the work per
request to what changes per request (:mod:`~poppy_django.verifier.caches`). Here:
:class:`DPoPVerifier`, which runs them in order for one configuration, and the process's
verifier for the current settings (:func:`verify`, :func:`get_verifier`).

An ``invalid_token`` refusal says which claim failed and why (never echoing a credential):
that is what a developer needs to fix a token minted for another audience. Proof refusals
keep one fixed description; which check failed is logged at DEBUG level (never the token or
the proof).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from poppy_django.conf import poppy_settings
from poppy_django.token_options import TokenOptions
from poppy_django.verifier import local_issuer, nonces, replay, sessions
from poppy_django.verifier.caches import ProofKeys
from poppy_django.verifier.claims import DESCRIPTIONS, Refused, claim, compact, same
from poppy_django.verifier.jwks import KeySource, RemoteKeys, StaticKeys
from poppy_django.verifier.principal import AuthRefusal, Prepared, Principal, RequestInfo
from poppy_django.verifier.proof import check_proof, proof_key
from poppy_django.verifier.session_token import TokenChecks, token_from

logger = logging.getLogger("poppy_django.auth")


class DPoPVerifier:
    """The verifier for one configuration; :func:`verify` keeps one per settings version."""

    def __init__(
        self,
        options: TokenOptions,
        *,
        issuer: str,
        keys: KeySource,
        path: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.options = options
        self.issuer = issuer
        self.keys = keys
        self.path = path.strip("/")
        self.clock = clock
        self.algs_param = " ".join(options.dpop_algorithms)
        self.tokens = TokenChecks(options, issuer=issuer, keys=keys, path=path)
        #: Verified tokens' claims (the token checks' cache).
        self.verified = self.tokens.verified
        #: One header per client key, and each verified token is bound to one: same bound.
        self.proof_keys = ProofKeys(options.verified_token_cache_size)

    # -- the contract ----------------------------------------------------------------------

    def __call__(self, request: RequestInfo) -> Principal:
        try:
            return self._verify(request, self.clock())
        except Refused as refused:
            logger.debug("Refused a Poppy request (%s): %s", refused.code, refused.reason)
            told = refused.code == "invalid_token" or refused.told
            description = refused.reason if told else None
            raise self.refusal(refused.code, scope=refused.scope, description=description) from None

    def refusal(
        self, code: str, *, scope: str | None = None, description: str | None = None
    ) -> AuthRefusal:
        """The :class:`AuthRefusal` for ``code``: WWW-Authenticate with algs, nonce if asked."""
        challenge = f'DPoP error="{code}"'
        if scope:
            challenge += f', scope="{scope}"'
        challenge += f', algs="{self.algs_param}"'
        headers: dict[str, str] = {}
        if code == "use_dpop_nonce" or self.options.require_nonce:
            headers["DPoP-Nonce"] = self.current_nonce()
        return AuthRefusal(
            code, description or DESCRIPTIONS[code], www_authenticate=challenge, headers=headers
        )

    def current_nonce(self) -> str:
        """The nonce a client should use now (for a ``DPoP-Nonce`` header)."""
        return nonces.issue(
            self.clock(), lifetime=self.options.nonce_lifetime, secret=self.options.nonce_secret
        )

    # -- the checks ------------------------------------------------------------------------

    def _verify(self, request: RequestInfo, now: float) -> Principal:
        checked = self._token_and_proof(request, now, remembered_only=False)
        assert checked is not None, "only a token not checked before is None, if asked"
        principal, jkt, jti = checked
        principal = self._in_session(principal, sessions.status(principal))
        # Last: only a request that passed every other check spends its jti.
        if not replay.first_use(
            jkt, jti, ttl=self.options.replay_ttl, alias=self.options.replay_cache
        ):
            raise Refused("invalid_dpop_proof", "jti replayed")
        return principal

    def prepare(self, request: RequestInfo) -> Prepared | None:
        """The checks of :meth:`__call__` without a blocking call (:class:`Prepare`): a
        token whose signature was checked before, a session whose status is remembered, a
        replay cache that can be asked on the event loop; None otherwise, or if refused (the
        verifier itself then answers, as always)."""
        try:
            found = self._token_and_proof(request, self.clock(), remembered_only=True)
            if found is None:
                return None
            principal, jkt, jti = found
            status = sessions.remembered_status(principal)
            if status is None:
                return None
            principal = self._in_session(principal, status)
        except Refused:
            return None
        spend = replay.spend_without_blocking(
            jkt, jti, ttl=self.options.replay_ttl, alias=self.options.replay_cache
        )
        return None if spend is None else Prepared(principal, spend)

    def _token_and_proof(
        self, request: RequestInfo, now: float, *, remembered_only: bool
    ) -> tuple[Principal, str, str] | None:
        """The token and proof checked: the token's principal, the proof key's thumbprint
        and the proof's ``jti``; None for a token not checked before (``remembered_only``)."""
        headers = request["headers"]
        token = token_from(self.options, headers.get("authorization"))
        proof = headers.get("dpop")
        if not isinstance(proof, str) or not proof:
            raise Refused("invalid_dpop_proof", "no DPoP header")
        if len(proof) > self.options.max_proof_bytes:
            raise Refused("invalid_dpop_proof", "DPoP header too large")
        compact(proof, "invalid_dpop_proof", "proof")
        segment = proof.partition(".")[0]
        remembered = self.proof_keys.get(segment)
        key = remembered or proof_key(self.options, proof)
        proof_claims = check_proof(self.options, proof, key, token, request, now)
        if remembered_only:
            claims = self.tokens.remembered(token, request["url"], now)
            if claims is None:
                return None
        else:
            claims = self.tokens.check(token, request["url"], now)
        jkt = key.jkt
        if not same(claim(claims, self.options.claims["jkt"]), jkt):
            raise Refused("invalid_dpop_proof", "proof key is not the token's cnf.jkt")
        if remembered is None:
            self.proof_keys.put(segment, key)
        return self.tokens.principal(claims, request["url"]), jkt, proof_claims["jti"]

    def _in_session(self, principal: Principal, status: sessions.Status) -> Principal:
        """``principal`` as its session stands (refused once it has ended), with the scope
        the configuration requires."""
        current = sessions.as_it_stands(principal, status)
        if current is None:
            raise Refused(
                "invalid_token",
                "session revoked: the session behind this token has ended (signed out or "
                "revoked); get a new token",
            )
        self.tokens.check_scope(current)
        return current

    def verify_bearer(self, request: RequestInfo) -> Principal:
        """``Authorization: Bearer <token>`` for the one resource that may take it (an MCP
        server, Poppy §4.3): every token check but the proof, and the token must be unbound.

        A token with a ``cnf.jkt`` is refused: a DPoP-bound token sent as Bearer is one
        whose key the sender may not hold (RFC 9449 §7.1). Only this verifier's audience is
        accepted, so a Bearer token is good at exactly the URL it was issued for.
        """
        try:
            authorization = request["headers"].get("authorization")
            token = token_from(self.options, authorization, scheme="bearer")
            claims = self.tokens.check(token, request["url"], self.clock())
            if claim(claims, self.options.claims["jkt"]) is not None:
                raise Refused(
                    "invalid_token", "Authorization: a DPoP-bound token is not a Bearer token"
                )
            principal = sessions.current(
                replace(self.tokens.principal(claims, request["url"]), token_type="Bearer")
            )
            if principal is None:
                raise Refused(
                    "invalid_token",
                    "session revoked: the session behind this token has ended (signed out or "
                    "revoked); get a new token",
                )
            self.tokens.check_scope(principal)
            return principal
        except Refused as refused:
            logger.debug("Refused a Bearer request (%s): %s", refused.code, refused.reason)
            told = refused.code == "invalid_token" or refused.told
            description = refused.reason if told else None
            raise self.refusal(refused.code, scope=refused.scope, description=description) from None


# -- the configured verifier ---------------------------------------------------------------

_lock = threading.Lock()
_current: DPoPVerifier | None = None


def key_source(options: TokenOptions) -> KeySource:
    """Inline JWKS, else the JWKS URL, else the keys of the issuer app installed in this
    project (:mod:`poppy_django.verifier.local_issuer`): its tokens are checked locally."""
    if options.jwks is not None:
        return StaticKeys(options.jwks)
    if options.jwks_url:
        return RemoteKeys(
            options.jwks_url,
            max_age=options.jwks_cache_seconds,
            min_refresh=options.jwks_min_refresh_seconds,
            timeout=options.jwks_timeout_seconds,
        )
    local = local_issuer.registered()
    if local is not None:
        refusal = local.refusal()
        if refusal is not None:
            raise ImproperlyConfigured(f"The DPoP verifier has no issuer keys: {refusal}")
        return StaticKeys(dict(local.public_jwks()))
    raise ImproperlyConfigured(
        'The DPoP verifier needs issuer keys: POPPY["TOKENS"]["JWKS_URL"] or ["JWKS"].'
    )


def _issuer() -> str:
    """:func:`~poppy_django.verifier.local_issuer.token_issuer`, required: the verifier
    cannot run without."""
    found = local_issuer.token_issuer()
    if found:
        return found
    local = local_issuer.registered()
    refusal = local.refusal() if local is not None else None
    if refusal is not None:
        raise ImproperlyConfigured(f"The DPoP verifier has no issuer: {refusal}")
    raise ImproperlyConfigured('The DPoP verifier needs POPPY["ISSUER"].')


def build_verifier(clock: Callable[[], float] = time.time) -> DPoPVerifier:
    """A verifier from the current settings."""
    options = poppy_settings.token_options
    return DPoPVerifier(
        options,
        issuer=_issuer(),
        keys=key_source(options),
        path=str(poppy_settings.PATH),
        clock=clock,
    )


def get_verifier() -> DPoPVerifier:
    """The verifier for the current settings, built once (its JWKS cache lives in it)."""
    global _current
    verifier = _current
    if verifier is None:
        with _lock:
            if _current is None:
                _current = build_verifier()
            verifier = _current
    return verifier


def verify(request: RequestInfo) -> Principal:
    """The default verifier: ``POPPY["AUTHENTICATE"] = "poppy_django.verifier.dpop.verify"``."""
    return get_verifier()(request)


def prepare(request: RequestInfo) -> Prepared | None:
    """:meth:`DPoPVerifier.prepare` of the verifier for the current settings."""
    return get_verifier().prepare(request)


verify.prepare = prepare  # type: ignore[attr-defined]  # the verifier's Prepare


def reset() -> None:
    """Forget the built verifier (settings changed; tests)."""
    global _current
    with _lock:
        _current = None


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    # DEBUG and POPPY_AUTHORITY: which key and issuer the local issuer has.
    if setting in ("POPPY", "POPPY_AUTHORITY", "SECRET_KEY", "CACHES", "DEBUG"):
        reset()
