"""Who is calling: the verifier seam, principals and refusals, and the hooks' types."""

from poppy_django.verifier.principal import (
    Actor,
    ActorFor,
    Authenticate,
    AuthRefusal,
    Prepare,
    Prepared,
    Principal,
    RequestInfo,
    SessionStatus,
)

__all__ = [
    "Actor",
    "ActorFor",
    "AuthRefusal",
    "Authenticate",
    "Prepare",
    "Prepared",
    "Principal",
    "RequestInfo",
    "SessionStatus",
]
