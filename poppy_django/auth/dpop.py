"""Deprecated path of :mod:`poppy_django.verifier.dpop` (see :mod:`poppy_django.auth`)."""

from poppy_django.verifier.dpop import DPoPVerifier, build_verifier, get_verifier, reset, verify

__all__ = ["DPoPVerifier", "build_verifier", "get_verifier", "reset", "verify"]
