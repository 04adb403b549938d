"""What the MCP server's methods answer: ``initialize``, ``tools/list`` and ``tools/call``.

The tools are the agent's personal-agent tools, gated by the same roles as in a
conversation (``personal_agent``, ``scope:<s>``). A read tool runs here, in the request, and
its result is the answer (docs/mcp.md says why not on a worker); a consequential (action)
tool never acts here: with the Operations extension negotiated it answers
``structuredContent.operation`` (Operations §4.2), otherwise ``403 extension_required``.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from pydantic import ValidationError

from poppy_django.agent import registry
from poppy_django.agent.runtime import resolve_actor, roles_of
from poppy_django.agent.tools import Tool, ToolContext
from poppy_django.errors import PoppyError
from poppy_django.mcp import config, jsonrpc
from poppy_django.mcp.tokens import challenges
from poppy_django.operations import negotiation, service
from poppy_django.operations import options as operations
from poppy_django.verifier import Principal

PROTOCOL_VERSION = "2025-06-18"


def initialize() -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "poppy-django", "version": "1"},
    }


def offered() -> list[Tool]:
    """Every tool a personal agent can be offered (a call is gated by its roles)."""
    return registry.get(config.agent_name()).personal_agent_tools


def listed() -> dict[str, Any]:
    """``tools/list``'s result."""
    return {
        "tools": [
            {
                "name": tool.name,
                "description": tool.description,
                "inputSchema": tool.json_schema(),
                "annotations": {"readOnlyHint": tool.kind == "read"},
            }
            for tool in offered()
        ]
    }


def call(
    request: HttpRequest, principal: Principal, rpc_id: Any, params: dict[str, Any]
) -> HttpResponse:
    """``tools/call``: a read tool's result, or an action's Operation; raises the
    :class:`PoppyError` of a role or an extension the caller lacks."""
    name, arguments = params.get("name"), params.get("arguments") or {}
    tool = next((t for t in offered() if t.name == name), None)
    if tool is None or not isinstance(arguments, dict):
        return jsonrpc.error(rpc_id, jsonrpc.INVALID_PARAMS, f"Unknown tool: {name}")
    roles = roles_of(principal)
    missing = tool.missing_scope(roles)
    if missing is not None:
        error = "insufficient_scope" if principal.signed_in else "sign_in_required"
        raise PoppyError(
            error, headers={"WWW-Authenticate": challenges(request, error, missing or None)}
        )
    if tool.kind == "action":
        return jsonrpc.result(rpc_id, _propose(request, principal, tool.name, arguments))
    try:
        validated = tool.validate(arguments)
    except ValidationError:
        return jsonrpc.tool_error(rpc_id, f"Invalid arguments for {tool.name}.")
    ctx = ToolContext(
        actor=resolve_actor(principal),
        roles=roles,
        conversation_id="",
        page_context={"channel": "poppy_mcp", "signed_in": principal.signed_in},
    )
    result = tool.function(ctx, **validated)
    structured = result if isinstance(result, dict) else {"result": result}
    return jsonrpc.result(
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
    if not operations.enabled() or not negotiation.lists_operations(principal.client_id):
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
    operation = service.propose_for(principal, tool_name, arguments, agent_name=config.agent_name())
    return {
        "content": [{"type": "text", "text": f"{operation.summary}: confirm it to do it."}],
        "structuredContent": {"operation": operation.to_wire()},
        "isError": False,
    }
