"""Fixtures for the engine tests: a fake clock and a seeder writing the engine's exact wire shapes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from support.seeding import outbox_value, spawn_value

from store import Keyspace, timer_member


@dataclass
class FakeClock:
    """A clock the test moves by hand: epoch and monotonic advance together."""

    epoch_s: float = 1_700_000_000.0
    mono_s: float = 1000.0

    def now(self) -> float:
        return self.epoch_s

    def monotonic(self) -> float:
        return self.mono_s

    def advance(self, seconds: float) -> None:
        self.epoch_s += seconds
        self.mono_s += seconds


class Seeder:
    """Writes outbox entries, spawn intents and timers as the engine's commit does.

    The shapes are in docs/internals.md#key-space.

    Each entry takes its seq from the counter, as an engine's commit does; the values are
    ``support.seeding``'s.
    """

    def __init__(self, client, prefix: str) -> None:
        self.client = client
        self.ks = Keyspace(prefix)

    async def outbox(self, target: str | None, event_id: str, data: dict | None = None) -> int:
        seq = int(await self.client.incr(self.ks.outbox_seq))
        await self.client.hset(self.ks.outbox, str(seq), outbox_value(target, event_id, data=data))
        return seq

    async def raw_outbox(self, field: str, value: bytes | str, *, bump: bool = True) -> None:
        if bump:
            await self.client.incr(self.ks.outbox_seq)
        await self.client.hset(self.ks.outbox, field, value)

    async def spawn(
        self, parent: str, child: str, root_path: str = "r.a", context: dict | None = None
    ) -> int:
        seq = int(await self.client.incr(self.ks.spawns_seq))
        await self.client.hset(self.ks.spawns, str(seq), spawn_value(parent, child, root_path, context))
        return seq

    async def timer(self, execution_id: str, path: str, fire_at: float) -> None:
        await self.client.zadd(self.ks.timers, {timer_member(execution_id, path): fire_at})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def seeder(async_client, prefix) -> Seeder:
    return Seeder(async_client, prefix)
