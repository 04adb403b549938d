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

This module is the HTTP view: Streamable HTTP's header rules, the caller, the JSON-RPC
message read strictly, the per-User rate, and the method's answer. Beside it: ``config``
(``POPPY["MCP"]`` and the server's addresses), ``tokens`` (the caller's token and the
challenges), ``jsonrpc`` (the messages written), ``tools`` (what the methods answer: a read
tool's result, an action's Operation) and ``metadata`` (RFC 9728).

Why not the ``mcp`` SDK: docs/dependencies.md.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from poppy_django.addresses import public_origin
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError, error_response
from poppy_django.mcp import config, jsonrpc, tokens, tools
from poppy_django.store import storable, windows
from poppy_django.verifier import Principal

#: The ``MCP-Protocol-Version`` values this server speaks (Streamable HTTP: a request naming
#: another is ``400``; one naming none is taken as the oldest, 2025-03-26).
SUPPORTED_VERSIONS = frozenset({tools.PROTOCOL_VERSION, "2025-03-26"})


@csrf_exempt
def mcp_view(request: HttpRequest) -> HttpResponse:
    """``POST {PATH}``: one JSON-RPC message; other methods ``405``."""
    if not config.enabled():
        return error_response("not_found")
    if request.method != "POST":
        return error_response("method_not_allowed", "Use POST.", headers={"Allow": "POST"})
    refused = _transport_refusal(request)
    if refused is not None:
        return refused
    authenticated = tokens.authenticate(request)
    if isinstance(authenticated, HttpResponse):
        return authenticated
    principal = authenticated
    if len(request.body) > poppy_settings.MAX_BODY_BYTES:
        return error_response("request_too_large")
    try:
        message = json.loads(request.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return jsonrpc.error(None, jsonrpc.PARSE_ERROR, "Parse error")
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "Invalid Request")
    method, rpc_id = message.get("method"), message.get("id")
    if not jsonrpc.valid_id(rpc_id):
        return jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "Invalid Request")
    if "id" not in message:  # a notification (notifications/initialized): accepted
        return HttpResponse(status=202)
    params = message.get("params") or {}
    if not isinstance(method, str) or not isinstance(params, dict):
        return jsonrpc.error(rpc_id, jsonrpc.INVALID_REQUEST, "Invalid Request")
    if storable.problem(params) is not None:
        return jsonrpc.error(rpc_id, jsonrpc.INVALID_PARAMS, "Invalid params")
    if not _admitted(principal):
        return error_response(
            "rate_limited", "Too many MCP calls; retry later.", headers={"Retry-After": "60"}
        )
    try:
        if method == "initialize":
            return jsonrpc.result(rpc_id, tools.initialize())
        if method == "ping":
            return jsonrpc.result(rpc_id, {})
        if method == "tools/list":
            return jsonrpc.result(rpc_id, tools.listed())
        if method == "tools/call":
            return tools.call(request, principal, rpc_id, params)
    except PoppyError as refusal:
        return jsonrpc.refused(refusal)
    return jsonrpc.error(rpc_id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")


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


def _admitted(principal: Principal) -> bool:
    """One more call of this client's User in the minute (``MCP["CALLS_PER_MINUTE"]``)."""
    key = f"mcp:{principal.client_id}:{principal.user_id}"
    return windows.count(key, seconds=60) <= config.calls_per_minute()
