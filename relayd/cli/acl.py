"""``relayd acl``: print the Redis ACL rule relayd needs for its prefixes (``relayd.acl``).

Alone it prints the selectors, for an ACL file or ``ACL SETUSER NAME reset on >PW <rule>``.
With ``--user`` it prints the whole ``ACL SETUSER`` command, ready for ``redis-cli``; the
password from ``--password-file`` goes in hashed (``#<sha256>``), never in clear.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import rich_click as click

from relayd.cli import options as o
from relayd.errors import ConfigError


@click.command("acl")
@o.in_panels
@o.PREFIX
@click.option(
    "--db",
    type=click.IntRange(min=0),
    default=0,
    help="Database number relayd uses (its keyspace channels name it).",
)
@click.option(
    "--stream",
    multiple=True,
    help="Key of a redis-stream sink destination on the same server (its stream=...; "
    "'{target}' becomes '*'); repeatable.",
)
@click.option("--user", help="Print a whole 'ACL SETUSER USER reset on ...' command.")
@click.option(
    "--password-file",
    type=o.FILE,
    help="With --user: the user's password, hashed into the command.",
)
def acl(
    prefix: tuple[str, ...],
    db: int,
    stream: tuple[str, ...],
    user: str | None,
    password_file: Path | None,
) -> None:
    """Print the Redis ACL rule (commands, key patterns, wake-up channels) relayd needs, and nothing more."""
    from relayd.acl import acl_rule
    from relayd.defaults import DEFAULTS
    from relayd.settings import expand_prefixes, read_secret_file

    try:
        prefixes = expand_prefixes(list(prefix or DEFAULTS.prefix))
        password = read_secret_file("--password-file", password_file) if password_file else None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if password is not None and user is None:
        raise ConfigError("--password-file goes with --user")
    rule = acl_rule(prefixes, db=db, streams=stream)
    if user is None:
        click.echo(rule)
        return
    if not user or any(c.isspace() for c in user):
        raise ConfigError(f"--user must be one word, got {user!r}")
    secret = f" #{hashlib.sha256(password.encode()).hexdigest()}" if password is not None else ""
    click.echo(f"ACL SETUSER {user} reset on{secret} {rule}")


def register(app: click.Group) -> None:
    app.add_command(acl)
