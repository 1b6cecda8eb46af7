"""Parse and check the ``pubsub:projects/PROJECT/topics/TOPIC`` spec, and the names it fills in.

Pure: no I/O and no Google library import, so a spec is checked before anything connects (and
without the ``gcp`` extra installed)::

    pubsub:projects/my-project/topics/events
    pubsub:projects/my-project/topics/{prefix}.{kind}?timeout_s=10

- PROJECT is a project id (6 to 30 lower-case letters, digits and hyphens, starting with a
  letter; a domain-scoped ``example.com:my-project`` too).
- TOPIC may hold ``{target}``, ``{kind}`` and ``{prefix}`` (``relayd.sinks.routing``); its fixed
  text must make a legal topic name: 3 to 255 letters, digits and ``-_.~+%``, starting with a
  letter, not with ``goog``. A name one envelope fills in that is not legal (a ``{target}``
  with a space) makes that envelope Permanent.
- ``timeout_s``: how long one publish request may take (default 30).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

from relayd.errors import ConfigError
from relayd.sinks.target_rules import DEFAULT_TIMEOUT_S, placeholder_sample, sink_params, timeout_param

EXAMPLE: Final = "pubsub:projects/PROJECT/topics/TOPIC"
#: The most seconds one publish request may be given (``timeout_s``).
TIMEOUT_MOST_S: Final = 600.0
_PROJECT: Final = re.compile(r"(?:[a-z0-9][a-z0-9.-]{0,62}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")
_TOPIC: Final = re.compile(r"[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}")
#: Longest ordering key Pub/Sub takes (bytes); a longer one is replaced by its hash.
ORDERING_KEY_MAX: Final = 1024


@dataclass(frozen=True, slots=True)
class PubSubTarget:
    """Where the pubsub sink publishes: ``project`` and the ``topic`` template, and the timeout."""

    project: str
    topic: str
    timeout_s: float = DEFAULT_TIMEOUT_S

    def path(self, topic: str) -> str:
        """The topic's resource name: ``projects/PROJECT/topics/TOPIC``."""
        return f"projects/{self.project}/topics/{topic}"


def parse_pubsub_target(text: str) -> PubSubTarget:
    """Parse what follows ``pubsub:``.

    Raises:
        ConfigError: one line naming the problem.
    """
    name, params = sink_params(text, "pubsub", ("timeout_s",))
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "projects" or parts[2] != "topics":
        raise ConfigError(f"sink 'pubsub' needs a topic name: {EXAMPLE!r}")
    project, topic = parts[1], parts[3]
    if not _PROJECT.fullmatch(project):
        raise ConfigError(f"sink 'pubsub': {project[:60]!r} is not a Google Cloud project id")
    if not topic_ok(placeholder_sample(topic)):
        raise ConfigError(
            f"sink 'pubsub': {topic[:60]!r} is not a legal topic name (3 to 255 letters, digits and"
            " '-_.~+%', starting with a letter, not with 'goog')"
        )
    bounds = f", more than 0, at most {TIMEOUT_MOST_S:g}"
    return PubSubTarget(project, topic, timeout_param(params, "pubsub", most=TIMEOUT_MOST_S, bounds=bounds))


def topic_ok(topic: str) -> bool:
    """Whether ``topic`` is a legal Pub/Sub topic name."""
    return _TOPIC.fullmatch(topic) is not None and not topic.lower().startswith("goog")


def ordering_key(key: str) -> str:
    """A Pub/Sub ordering key: ``key``, or ``sha256-`` and its hex digest when it is too long."""
    if len(key.encode()) <= ORDERING_KEY_MAX:
        return key
    return "sha256-" + hashlib.sha256(key.encode()).hexdigest()
