"""JSON-RPC 2.0 as the MCP server writes it: one message answered with one message, never
cached (a result may be a User's data)."""

from __future__ import annotations

import math
from typing import Any

from django.http import HttpResponse, JsonResponse

from poppy_django.errors import PoppyError
from poppy_django.store import storable

#: JSON-RPC error codes.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


def valid_id(rpc_id: Any) -> bool:
    """A JSON-RPC id: a string, an integer, a finite number or null (never NaN, Infinity or
    a structure, which could not be echoed as JSON)."""
    if isinstance(rpc_id, bool):
        return False
    if rpc_id is None or isinstance(rpc_id, int):
        return True
    if isinstance(rpc_id, str):
        return storable.problem(rpc_id) is None
    return isinstance(rpc_id, float) and math.isfinite(rpc_id)


def result(rpc_id: Any, answer: dict[str, Any]) -> HttpResponse:
    response = JsonResponse({"jsonrpc": "2.0", "id": rpc_id, "result": answer})
    response["Cache-Control"] = "no-store"
    return response


def tool_error(rpc_id: Any, text: str) -> HttpResponse:
    """A tool's result that is an error (MCP's ``isError``), not a JSON-RPC error."""
    return result(rpc_id, {"content": [{"type": "text", "text": text}], "isError": True})


def error(rpc_id: Any, code: int, message: str) -> HttpResponse:
    response = JsonResponse(
        {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}
    )
    response["Cache-Control"] = "no-store"
    return response


def refused(refusal: PoppyError) -> HttpResponse:
    """A refusal of the call itself (a role, an extension): the wire's HTTP error."""
    response = refusal.response()
    response["Cache-Control"] = "no-store"
    return response
