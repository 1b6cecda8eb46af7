"""How an operator installs one of relayd's optional extras, worded once for every hint."""

from __future__ import annotations


def install_command(extra: str) -> str:
    """The pip command for ``extra``, from an index and from a source checkout.

    >>> install_command("kafka")
    "pip install 'relayd[kafka]' (from a checkout: pip install '.[kafka]')"
    """
    return f"pip install 'relayd[{extra}]' (from a checkout: pip install '.[{extra}]')"
