"""Cut a batch into requests under a broker's two limits: entries per request and bytes per request.

Shared by the sinks that publish in batched requests (SQS/SNS/Kinesis, Pub/Sub). Pure: the caller
gives each entry's size as that broker counts it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def chunks(
    indexes: Sequence[int], sizes: Sequence[int] | Mapping[int, int], *, max_entries: int, max_bytes: int
) -> list[list[int]]:
    """Split ``indexes`` (in order) into requests of at most ``max_entries`` and ``max_bytes``;
    ``sizes[index]`` is an entry's size."""
    out: list[list[int]] = []
    current: list[int] = []
    used = 0
    for index in indexes:
        size = sizes[index]
        if current and (len(current) >= max_entries or used + size > max_bytes):
            out.append(current)
            current, used = [], 0
        current.append(index)
        used += size
    if current:
        out.append(current)
    return out
