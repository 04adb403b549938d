"""The turn engine: who may write a conversation (leases), where turns run (executors, the
per-process asyncio loop), answering (turns), recovery of dead writers, approved actions."""
