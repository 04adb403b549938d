"""The Company's own Poppy authorization server: add ``"poppy_django.authority"`` to be the issuer.

It serves the issuer's OAuth metadata (RFC 8414) and its token endpoint: personal agents
identified by their HTTPS ``client_id`` start Sessions with a signed assertion and a DPoP
proof, and get short-lived DPoP-bound Session Tokens that the default verifier
(:mod:`poppy_django.verifier.dpop`) checks locally. See ``docs/authority.md``.
"""
