"""The MCP server of the Company Agent's tools, on with ``POPPY["MCP"]["ENABLED"]``: the view
(:mod:`~poppy_django.mcp.server`), its settings and addresses (``config``), its tokens, its
JSON-RPC messages, what its methods answer (``tools``) and its RFC 9728 ``metadata``;
:mod:`~poppy_django.mcp.seams` plugs it into discovery and the issuer's resources."""
