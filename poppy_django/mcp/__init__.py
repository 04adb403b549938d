"""The MCP server of the Company Agent's tools (:mod:`~poppy_django.mcp.server`), on with
``POPPY["MCP"]["ENABLED"]``; :mod:`~poppy_django.mcp.seams` plugs it into discovery and the
issuer's resources."""
