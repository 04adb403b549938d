"""Who is calling: the verifier seam, principals and refusals."""

from poppy_django.verifier.principal import Actor, AuthRefusal, Principal, RequestInfo

__all__ = ["Actor", "AuthRefusal", "Principal", "RequestInfo"]
