"""A small harel 0.9 application for the harel sink's tests: an ``order`` with two regions.

``order`` forks ``Payment`` (waits for ``Paid``; its ``timeout`` decides the outcome) and
``Shipping`` (invokes the ``courier`` submachine, whose context has defaults, and branches on
the ``tries`` it carries back: a courier created without its defaults fails the order). Each
region's ``Finished`` and the courier's reach their parent through the outbox. Entering
``Done``, ``Failed`` or the courier's ``Dispatch`` runs ``record``, which appends a line to the
file ``HAREL_APP_LEDGER`` names: the side effects, counted outside Redis.

``write_definitions`` writes the machines where harel's worker reads them
(``HAREL_DEFINITIONS_DIR``); ``record`` must be importable by the worker (``support`` on its
``PYTHONPATH``).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

#: The payment timeout (s) of an order; the tests send ``Paid`` well before it, or never.
PAY_TIMEOUT_S = 8


def source(pay_timeout_s: int = PAY_TIMEOUT_S) -> str:
    return f"""
event Go {{}}
event Paid {{}}

machine courier {{
  context {{
    tries: int = 2
    note: string = "by-courier"
  }}
  carry tries, note
  initial Dispatch
  state Dispatch {{ on enter support.harel_app.record(what: "dispatch") }}
  final Delivered success
  from Dispatch to Delivered
}}

machine order {{
  initial Start
  state Start {{}}
  orthogonal Work {{
    state Payment {{
      initial AwaitPay
      state AwaitPay {{ timeout {pay_timeout_s} }}
      final PayOk success
      final PayFail failed
      from AwaitPay to PayOk on Paid
      from AwaitPay to PayFail on Timeout
    }}
    state Shipping {{
      initial Booking
      state Booking {{ invoke courier }}
      final Shipped success
      final ShipFail failed
      from Booking choose on Returned {{
        when tries == 2 to Shipped
        else to ShipFail
      }}
    }}
  }}
  final Done success {{ on enter support.harel_app.record(what: "done") }}
  final Failed failed {{ on enter support.harel_app.record(what: "failed") }}
  from Start to Work on Go
  from Work join all to Done else to Failed
}}
"""


def write_definitions(directory: Path, pay_timeout_s: int = PAY_TIMEOUT_S) -> Path:
    """The machines as ``app.stm`` in ``directory`` (created); returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "app.stm").write_text(source(pay_timeout_s))
    return directory


def record(proxy: Any, event: Any, what: str = "", **inputs: Any) -> None:
    """Append ``EXECUTION WHAT KEY`` to the ledger (the key: harel's idempotency key,
    ``{execution_id}:{event id}:{index}:{action}``; this app's actions run on a ``Start`` or a
    ``Finished``, whose ids hold no colon)."""
    key = str(proxy.idempotency_key)
    execution_id = key.rsplit(":", 3)[0]
    ledger = os.environ.get("HAREL_APP_LEDGER")
    if ledger:
        with open(ledger, "a", encoding="utf-8") as out:
            out.write(f"{execution_id} {what} {key}\n")


def ledger_counts(path: Path) -> Counter[tuple[str, str]]:
    """How many distinct runs (idempotency keys) of each (execution, what) the ledger holds."""
    if not path.exists():
        return Counter()
    seen = {tuple(line.split(" ")) for line in path.read_text().splitlines() if line.strip()}
    return Counter((execution, what) for execution, what, _ in seen)
