"""store.fence: the guard check every fenced read makes on its ``GET`` of the guard key."""

from __future__ import annotations

import pytest

from store import Fence, StoreFenced
from store.fence import check_guard, guard_read

FENCE = Fence("p:lease", "token-a")


def test_a_fenced_read_gets_the_guard_key():
    assert guard_read(FENCE) == ("GET", "p:lease")


@pytest.mark.parametrize("holder", [b"token-a", "token-a"], ids=["bytes", "text"])
def test_the_writer_s_own_token_lets_the_read_through(holder):
    check_guard(FENCE, holder, found=[b"e1"])  # no error


@pytest.mark.parametrize(
    "holder",
    [b"token-b", None, b"\xfftoken-a", b"token-a "],
    ids=["another", "none", "invalid-utf8", "padded"],
)
def test_any_other_holder_refuses_the_read_and_names_what_it_withheld(holder):
    with pytest.raises(StoreFenced) as refused:
        check_guard(FENCE, holder, found=[b"e1", None, b"e3", b"e4", None])  # two places empty
    assert refused.value.key == "p:lease"
    assert refused.value.withheld == 3
