"""Deprecated path of :mod:`poppy_django.verifier.sessions` (see :mod:`poppy_django.auth`)."""

from poppy_django.verifier.sessions import current, forget, revoked, status

__all__ = ["current", "forget", "revoked", "status"]
