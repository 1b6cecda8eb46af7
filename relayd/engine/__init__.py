"""The sweep engine: pure planning apart from the Redis and sink I/O shells."""
