"""A command group whose help lists its commands in the order they were added, not sorted."""

from __future__ import annotations

import rich_click as click


class OrderedGroup(click.RichGroup):
    """``relayd --help`` lists ``sweep`` first: the order of ``add_command`` is the order of use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)
