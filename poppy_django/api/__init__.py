"""The HTTP face: the conversation endpoint's DRF views, serializers, schema, throttles and
permissions, its SSE stream, discovery, and the MCP and feedback endpoints."""
