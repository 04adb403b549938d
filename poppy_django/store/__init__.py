"""The durable log: appending to a conversation's events, reading them back, the raw
statements of the hot path, identifiers, and the counters shared by every process."""
