"""Deprecated path of :mod:`poppy_django.verifier.local_issuer` (see :mod:`poppy_django.auth`)."""

from poppy_django.verifier.local_issuer import LocalIssuer, issuing, register, registered

__all__ = ["LocalIssuer", "issuing", "register", "registered"]
