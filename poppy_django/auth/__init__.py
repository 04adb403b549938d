"""Deprecated: the verifier's package is :mod:`poppy_django.verifier` (renamed after 0.2.0).

``auth`` and ``authority`` read alike and meant the two sides of a token, so the resource
server's half took the name of what it does. The paths the docs named before keep working for
one release, with a ``DeprecationWarning``: ``poppy_django.auth.dpop.verify``,
``poppy_django.auth.fake.verify``, ``poppy_django.auth.sessions.revoked``,
``poppy_django.auth.local_issuer`` and the principal types here.
"""

import warnings

from poppy_django.verifier.principal import Actor, AuthRefusal, Principal, RequestInfo

warnings.warn(
    "poppy_django.auth is deprecated: use poppy_django.verifier (e.g. "
    '"poppy_django.verifier.dpop.verify" in POPPY["AUTHENTICATE"]).',
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["Actor", "AuthRefusal", "Principal", "RequestInfo"]
