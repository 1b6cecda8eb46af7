"""``relayd acl``: print the Redis ACL rule relayd needs for its prefixes (``relayd.security.acl``).

Alone it prints the selectors, for an ACL file or ``ACL SETUSER NAME reset on >PW <rule>``.
With ``--user`` it prints the whole ``ACL SETUSER`` command, ready for ``redis-cli``; the
password from ``--password-file`` goes in hashed (``#<sha256>``), never in clear.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated

import typer

from relayd.cli import options as o
from relayd.errors import ConfigError


@o.PREFIX
def acl(
    db: Annotated[
        int, typer.Option(min=0, help="Database number relayd uses (its keyspace channels name it).")
    ] = 0,
    stream: Annotated[
        list[str] | None,
        typer.Option(
            help="Key of a redis-stream sink destination on the same server (its stream=...; "
            "'{target}' becomes '*'); repeatable.",
        ),
    ] = None,
    user: Annotated[
        str | None, typer.Option(help="Print a whole 'ACL SETUSER USER reset on ...' command.")
    ] = None,
    password_file: Annotated[
        Path | None, typer.Option(help="With --user: the user's password, hashed into the command.")
    ] = None,
    prefix: list[str] | None = None,
) -> None:
    """Print the Redis ACL rule (commands, key patterns, wake-up channels) relayd needs, and nothing more."""
    from relayd.config.connection import RedisOptions
    from relayd.config.prefixes import expand_prefixes
    from relayd.config.settings import read_secret_file
    from relayd.security.acl import acl_rule

    try:
        prefixes = expand_prefixes(list(prefix or RedisOptions().prefix))
        password = read_secret_file("--password-file", password_file) if password_file else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if password is not None and user is None:
        raise ConfigError("--password-file goes with --user")
    rule = acl_rule(prefixes, db=db, streams=stream or ())
    if user is None:
        typer.echo(rule)
        return
    if not user or any(c.isspace() for c in user):
        raise ConfigError(f"--user must be one word, got {user!r}")
    secret = f" #{hashlib.sha256(password.encode()).hexdigest()}" if password is not None else ""
    typer.echo(f"ACL SETUSER {user} reset on{secret} {rule}")


def register(app: typer.Typer) -> None:
    app.command("acl")(acl)
