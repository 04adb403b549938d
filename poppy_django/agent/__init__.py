"""The Company Agent runtime: agents, tools, and what a turn runs."""

from poppy_django.agent.registry import CompanyAgent, get, register
from poppy_django.agent.tools import ActionFailed, Component, Tool, ToolContext, tool

__all__ = [
    "ActionFailed",
    "CompanyAgent",
    "Component",
    "Tool",
    "ToolContext",
    "get",
    "register",
    "tool",
]
