"""Deprecated path of :mod:`poppy_django.verifier.fake` (see :mod:`poppy_django.auth`)."""

from poppy_django.verifier.fake import fake_authorization, verify

__all__ = ["fake_authorization", "verify"]
