"""``moto.server`` with one fix for concurrent writers: a lock around Kinesis's ``Shard.put_record``.

moto serves each request on its own thread, and a shard numbers a record by reading its highest
sequence number and adding one ("not safe for concurrency", says moto's own comment). Two
``PutRecords`` requests landing at once on one shard can take the same number, and the later
record replaces the earlier one: a record relayd delivered (and Kinesis confirmed) disappears
from the stream. relayd sends requests for different partition keys concurrently, so the tests
read back what a real, serialising shard would have kept.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from moto.kinesis import models
from moto.server import main

_put_record = models.Shard.put_record
_lock = threading.Lock()


def _serialised_put_record(self: models.Shard, *args: Any, **kwargs: Any) -> str:
    with _lock:
        return _put_record(self, *args, **kwargs)


models.Shard.put_record = _serialised_put_record  # type: ignore[method-assign]

if __name__ == "__main__":
    main(sys.argv[1:])
