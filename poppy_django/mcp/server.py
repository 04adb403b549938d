"""An MCP server for the Company Agent's tools: Streamable HTTP, JSON-RPC, DPoP tokens.

``POPPY["MCP"] = {"ENABLED": True}`` and ``path("", include("poppy_django.mcp_urls"))``
serve, at ``{origin}/{PATH}`` (``poppy/mcp``):

- ``initialize``, ``notifications/*``, ``ping``, ``tools/list`` and ``tools/call`` over
  Streamable HTTP (a POST of one JSON-RPC message, answered with one JSON message; no
  server-initiated stream is needed for tools);
- RFC 9728 protected-resource metadata at ``/.well-known/oauth-protected-resource/{PATH}``
  (``resource``, ``authorization_servers``, the DPoP algorithms);
- Session Tokens issued for its ``resource`` (the authority's token endpoint takes
  ``resource=<this URL>``), their ``aud`` exactly this URL, so a conversation endpoint's
  token is refused here and this server's token is refused everywhere else. The company
  chooses the type by the server (§4.3, ``POPPY["MCP"]["DPOP"]``): a DPoP server (the
  default) issues DPoP-bound tokens only, with a proof (``Authorization: DPoP``); a Bearer
  server — the one place the draft allows one — issues Bearer tokens bound to its URL, with
  or without a proof (``Authorization: Bearer``). ``Authorization: Bearer`` is read at
  either for an unbound token issued for this URL: a DPoP-bound token sent as Bearer is
  refused. An unauthenticated call is ``401`` with one challenge per scheme it accepts,
  ``Bearer`` (then ``DPoP``), each naming the metadata (RFC 9728 §5.1).

The tools are the agent's personal-agent tools, gated by the same roles as in a
conversation (``personal_agent``, ``scope:<s>``): a call without its role is ``403
sign_in_required`` / ``insufficient_scope`` with the scope in the challenge. A consequential
(action) tool never acts here: with the Operations extension negotiated it answers
``structuredContent.operation`` (the same operation as the API's and the conversation's);
otherwise it is ``403 extension_required``.

Why not the ``mcp`` SDK: docs/dependencies.md.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import replace
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError

from poppy_django import addresses
from poppy_django.addresses import public_origin
from poppy_django.agent import registry
from poppy_django.agent.runtime import resolve_actor, roles_of
from poppy_django.agent.tools import ToolContext
from poppy_django.api.rest_framework import request_info
from poppy_django.conf import poppy_settings, unknown_keys
from poppy_django.errors import PoppyError, error_response
from poppy_django.operations import negotiation, options, service
from poppy_django.store import storable, windows
from poppy_django.verifier import AuthRefusal, Principal, local_issuer
from poppy_django.verifier import dpop as dpop_verifier

PROTOCOL_VERSION = "2025-06-18"
#: The ``MCP-Protocol-Version`` values this server speaks (Streamable HTTP: a request naming
#: another is ``400``; one naming none is taken as the oldest, 2025-03-26).
SUPPORTED_VERSIONS = frozenset({PROTOCOL_VERSION, "2025-03-26"})
KEYS = frozenset({"ENABLED", "PATH", "AGENT", "DPOP", "CALLS_PER_MINUTE"})
#: JSON-RPC error codes.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
#: Calls one personal agent's User may make per minute by default.
CALLS_PER_MINUTE = 120


def _options() -> dict[str, Any]:
    raw = dict(poppy_settings.MCP or {})
    unknown = unknown_keys('POPPY["MCP"]', raw, sorted(KEYS))
    if unknown:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(unknown)
    return raw


def enabled() -> bool:
    return bool(_options().get("ENABLED", False))


def supports_dpop() -> bool:
    """``DPOP`` (True): a DPoP server — its tokens are DPoP-bound and issued only with a
    proof; False: a Bearer server — its tokens are Bearer, bound to its URL (Poppy §4.3:
    the company chooses the token type by the MCP server)."""
    return bool(_options().get("DPOP", True))


def path() -> str:
    return str(_options().get("PATH", "poppy/mcp")).strip("/")


def agent_name() -> str:
    return str(_options().get("AGENT") or poppy_settings.AGENT)


def resource_url(request: HttpRequest | None = None) -> str:
    """This MCP server's URL: its ``resource`` and the ``url`` listed in ``poppy.json``."""
    origin = public_origin(request) if request is not None else addresses.configured_origin()
    return f"{origin}/{path()}"


def resources(request: HttpRequest | None) -> list[str]:
    """The resources a Session Token may be issued for besides the endpoint: this server."""
    return [resource_url(request)] if enabled() else []


def discovery_entry(request: HttpRequest | None) -> dict[str, str]:
    """``poppy.json``'s ``apis`` entry: the server's URL is also its token ``resource``."""
    url = resource_url(request)
    return {
        "type": "mcp",
        "url": url,
        "resource": url,
        "description": "The Company Agent's tools over MCP (Streamable HTTP).",
    }


def metadata_url(request: HttpRequest) -> str:
    return f"{public_origin(request)}/.well-known/oauth-protected-resource/{path()}"


# -- tokens --------------------------------------------------------------------------------

_verifiers: dict[str, dpop_verifier.DPoPVerifier] = {}
_lock = threading.Lock()


def _verifier(resource: str) -> dpop_verifier.DPoPVerifier:
    """The default verifier's checks with one audience: exactly this server's URL."""
    with _lock:
        verifier = _verifiers.get(resource)
        if verifier is None:
            base = dpop_verifier.get_verifier()
            verifier = dpop_verifier.DPoPVerifier(
                replace(base.options, audience=(resource,)),
                issuer=base.issuer,
                keys=base.keys,
                path=path(),
            )
            _verifiers[resource] = verifier
        return verifier


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("POPPY", "SECRET_KEY", "CACHES", "DEBUG"):
        with _lock:
            _verifiers.clear()


def challenges(
    request: HttpRequest,
    error: str | None = None,
    scope: str | None = None,
    *,
    extension: str | None = None,
) -> str:
    """``WWW-Authenticate`` for this server: one challenge per scheme it accepts, Bearer
    then DPoP, each with the same ``error`` and ``scope`` and the protected-resource
    metadata (RFC 9728 §5.1). No ``error`` when the request carried no credentials
    (RFC 6750 §3.1)."""
    params = [f'error="{error}"'] if error else []
    if scope:
        params.append(f'scope="{scope}"')
    if extension:
        params.append(f'extension="{extension}"')
    metadata = f'resource_metadata="{metadata_url(request)}"'
    bearer = "Bearer " + ", ".join([*params, metadata])
    if not supports_dpop():
        return bearer
    algs = " ".join(poppy_settings.token_options.dpop_algorithms)
    return bearer + ", DPoP " + ", ".join([*params, f'algs="{algs}"', metadata])


def _scheme(request: HttpRequest) -> str:
    scheme, _, _ = request.headers.get("Authorization", "").strip().partition(" ")
    return scheme.lower()


def _authenticate(request: HttpRequest) -> Principal | HttpResponse:
    """A Bearer token, or at a DPoP server a DPoP-bound token with its proof, each issued
    for this URL."""
    verifier = _verifier(resource_url(request))
    scheme = _scheme(request)
    try:
        if scheme == "bearer" or not supports_dpop():
            return verifier.verify_bearer(request_info(request))
        return verifier(request_info(request))
    except AuthRefusal as refusal:
        response = refusal.response()
        error = refusal.code if "Authorization" in request.headers else None
        response["WWW-Authenticate"] = challenges(request, error, _scope_of(refusal))
        return response


def _scope_of(refusal: AuthRefusal) -> str | None:
    return refusal.www_authenticate.partition('scope="')[2].partition('"')[0] or None


# -- the views -----------------------------------------------------------------------------


def protected_resource_metadata(request: HttpRequest) -> HttpResponse:
    """``GET /.well-known/oauth-protected-resource/{PATH}`` (RFC 9728)."""
    if not enabled() or request.method not in ("GET", "HEAD"):
        return error_response("not_found")
    issuer = local_issuer.token_issuer()
    document: dict[str, Any] = {
        "resource": resource_url(request),
        "authorization_servers": [issuer] if issuer else [],
        "scopes_supported": sorted(_scopes()),
        "bearer_methods_supported": ["header"],
    }
    if supports_dpop():  # a DPoP server (RFC 9728 §2): its tokens are DPoP-bound only
        document["dpop_signing_alg_values_supported"] = list(
            poppy_settings.token_options.dpop_algorithms
        )
        document["dpop_bound_access_tokens_required"] = True
    response = JsonResponse(document)
    response["Cache-Control"] = "public, max-age=300"
    response["Access-Control-Allow-Origin"] = "*"
    return response


def _scopes() -> set[str]:
    return {
        role.removeprefix("scope:")
        for tool in registry.get(agent_name()).personal_agent_tools
        for role in tool.roles
        if role.startswith("scope:")
    }


@csrf_exempt
def mcp_view(request: HttpRequest) -> HttpResponse:
    """``POST {PATH}``: one JSON-RPC message; other methods ``405``."""
    if not enabled():
        return error_response("not_found")
    if request.method != "POST":
        return error_response("method_not_allowed", "Use POST.", headers={"Allow": "POST"})
    refused = _transport_refusal(request)
    if refused is not None:
        return refused
    authenticated = _authenticate(request)
    if isinstance(authenticated, HttpResponse):
        return authenticated
    principal = authenticated
    if len(request.body) > poppy_settings.MAX_BODY_BYTES:
        return error_response("request_too_large")
    try:
        message = json.loads(request.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _rpc_error(None, PARSE_ERROR, "Parse error")
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _rpc_error(None, INVALID_REQUEST, "Invalid Request")
    method, rpc_id = message.get("method"), message.get("id")
    if not _valid_id(rpc_id):
        return _rpc_error(None, INVALID_REQUEST, "Invalid Request")
    if "id" not in message:  # a notification (notifications/initialized): accepted
        return HttpResponse(status=202)
    params = message.get("params") or {}
    if not isinstance(method, str) or not isinstance(params, dict):
        return _rpc_error(rpc_id, INVALID_REQUEST, "Invalid Request")
    if storable.problem(params) is not None:
        return _rpc_error(rpc_id, INVALID_PARAMS, "Invalid params")
    if not _admitted(principal):
        return error_response(
            "rate_limited", "Too many MCP calls; retry later.", headers={"Retry-After": "60"}
        )
    try:
        if method == "initialize":
            return _rpc_result(rpc_id, _initialize())
        if method == "ping":
            return _rpc_result(rpc_id, {})
        if method == "tools/list":
            return _rpc_result(rpc_id, {"tools": _tools()})
        if method == "tools/call":
            return _call(request, principal, rpc_id, params)
    except PoppyError as error:
        return _refused(request, error)
    return _rpc_error(rpc_id, METHOD_NOT_FOUND, f"Method not found: {method}")


def _transport_refusal(request: HttpRequest) -> HttpResponse | None:
    """Streamable HTTP's header rules: an unsupported ``MCP-Protocol-Version`` is ``400``; an
    ``Origin`` other than this server's is ``403`` (DNS rebinding)."""
    version = request.headers.get("MCP-Protocol-Version")
    if version is not None and version not in SUPPORTED_VERSIONS:
        return error_response(
            "invalid_request",
            f"Unsupported MCP-Protocol-Version; this server speaks "
            f"{', '.join(sorted(SUPPORTED_VERSIONS))}.",
        )
    origin = request.headers.get("Origin")
    if origin is not None and origin.rstrip("/") != public_origin(request).rstrip("/"):
        return error_response("forbidden", "Requests from another origin are refused.")
    return None


def _valid_id(rpc_id: Any) -> bool:
    """A JSON-RPC id: a string, an integer, a finite number or null (never NaN, Infinity or
    a structure, which could not be echoed as JSON)."""
    if isinstance(rpc_id, bool):
        return False
    if rpc_id is None or isinstance(rpc_id, int):
        return True
    if isinstance(rpc_id, str):
        return storable.problem(rpc_id) is None
    return isinstance(rpc_id, float) and math.isfinite(rpc_id)


def _admitted(principal: Principal) -> bool:
    """One more call of this client's User in the minute (``MCP["CALLS_PER_MINUTE"]``)."""
    limit = int(_options().get("CALLS_PER_MINUTE", CALLS_PER_MINUTE))
    key = f"mcp:{principal.client_id}:{principal.user_id}"
    return windows.count(key, seconds=60) <= limit


def _initialize() -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "poppy-django", "version": "1"},
    }


def _tools() -> list[dict[str, Any]]:
    """Every tool a personal agent can be offered (a call is gated by its roles)."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.json_schema(),
            "annotations": {"readOnlyHint": tool.kind == "read"},
        }
        for tool in registry.get(agent_name()).personal_agent_tools
    ]


def _call(
    request: HttpRequest, principal: Principal, rpc_id: Any, params: dict[str, Any]
) -> HttpResponse:
    name, arguments = params.get("name"), params.get("arguments") or {}
    tool = next(
        (t for t in registry.get(agent_name()).personal_agent_tools if t.name == name), None
    )
    if tool is None or not isinstance(arguments, dict):
        return _rpc_error(rpc_id, INVALID_PARAMS, f"Unknown tool: {name}")
    roles = roles_of(principal)
    missing = tool.missing_scope(roles)
    if missing is not None:
        error = "insufficient_scope" if principal.signed_in else "sign_in_required"
        raise PoppyError(
            error, headers={"WWW-Authenticate": challenges(request, error, missing or None)}
        )
    if tool.kind == "action":
        return _rpc_result(rpc_id, _propose(request, principal, tool.name, arguments))
    try:
        validated = tool.validate(arguments)
    except ValidationError:
        return _tool_error(rpc_id, f"Invalid arguments for {tool.name}.")
    ctx = ToolContext(
        actor=resolve_actor(principal),
        roles=roles,
        conversation_id="",
        page_context={"channel": "poppy_mcp", "signed_in": principal.signed_in},
    )
    result = tool.function(ctx, **validated)
    structured = result if isinstance(result, dict) else {"result": result}
    return _rpc_result(
        rpc_id,
        {
            "content": [{"type": "text", "text": json.dumps(structured, default=str)}],
            "structuredContent": json.loads(json.dumps(structured, default=str)),
            "isError": False,
        },
    )


def _propose(
    request: HttpRequest, principal: Principal, tool_name: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """A consequential tool answers with an Operation (Operations §4.2), never acting."""
    if not options.enabled() or not negotiation.lists_operations(principal.client_id):
        raise PoppyError(
            "extension_required",
            "This tool proposes operations: list the operations extension, version 1.",
            extra={"extension": negotiation.EXTENSION},
            headers={
                "WWW-Authenticate": challenges(
                    request, "extension_required", extension=negotiation.EXTENSION
                )
            },
        )
    operation = service.propose_for(principal, tool_name, arguments, agent_name=agent_name())
    wire = operation.to_wire()
    return {
        "content": [{"type": "text", "text": f"{operation.summary}: confirm it to do it."}],
        "structuredContent": {"operation": wire},
        "isError": False,
    }


def _refused(request: HttpRequest, error: PoppyError) -> HttpResponse:
    response = error.response()
    response["Cache-Control"] = "no-store"
    return response


def _rpc_result(rpc_id: Any, result: dict[str, Any]) -> HttpResponse:
    response = JsonResponse({"jsonrpc": "2.0", "id": rpc_id, "result": result})
    response["Cache-Control"] = "no-store"
    return response


def _tool_error(rpc_id: Any, text: str) -> HttpResponse:
    return _rpc_result(rpc_id, {"content": [{"type": "text", "text": text}], "isError": True})


def _rpc_error(rpc_id: Any, code: int, message: str) -> HttpResponse:
    response = JsonResponse(
        {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}
    )
    response["Cache-Control"] = "no-store"
    return response
