"""The README stays true: the option table it links matches the real CLI, its commands match CI."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer.main

from relayd.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
#: ``relayd bench`` has its own flags, documented in docs/performance.md, not as configuration.
BENCHMARK_COMMANDS = {"bench"}
#: The console's own options are documented in its page's Options table (docs/console.md).
CONSOLE_OPTIONS_DOC = ROOT / "docs" / "console.md"
#: Each sink's own options are in the Sink options table of docs/sinks.md, in the README's form.
SINKS_DOC = (ROOT / "docs" / "sinks.md").read_text()
#: The core options' table, which the README links to.
CONFIGURATION_DOC = (ROOT / "docs" / "configuration.md").read_text()


def _section(title: str, text: str = README) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"no '## {title}' section"
    return match.group(1)


def _readme_options() -> dict[tuple[str, str], str]:
    """``(--flag, ENV_VAR) -> default cell`` from the configuration page's table and the sinks page's."""
    rows = {}
    tables = _section("Options", CONFIGURATION_DOC) + _section("Sink options", SINKS_DOC)
    for line in tables.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`--"):
            flag = cells[0].split()[0].strip("`")  # "`--json` (status, dlq list)" names the flag first
            rows[flag, cells[1].strip("`")] = cells[2]
    return rows


def _cli_options() -> dict[tuple[str, str], Any]:
    """``(--flag, ENV_VAR) -> option`` for every option with a variable, all commands (Typer's click)."""
    found: dict[tuple[str, str], Any] = {}

    def walk(command: Any) -> None:
        for sub in getattr(command, "commands", {}).values():
            walk(sub)
        for param in getattr(command, "params", []):
            if type(param).__name__.endswith("Option") and param.envvar:
                found[param.opts[0], param.envvar] = param

    root = typer.main.get_command(app)
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        if name not in BENCHMARK_COMMANDS:
            walk(command)
    console_doc = CONSOLE_OPTIONS_DOC.read_text()
    return {key: option for key, option in found.items() if f"`{key[1]}`" not in console_doc}


def test_the_console_page_documents_the_console_options() -> None:
    documented = CONSOLE_OPTIONS_DOC.read_text()

    for flag, envvar in [
        ("--console-addr", "RELAYD_CONSOLE_ADDR"),
        ("--allow-actions", "RELAYD_ALLOW_ACTIONS"),
        ("--console-token-file", "RELAYD_CONSOLE_TOKEN_FILE"),
        ("--console", "RELAYD_DEMO_CONSOLE"),
        ("--console-replay-rate", "RELAYD_CONSOLE_REPLAY_RATE"),
    ]:
        assert f"`{flag}" in documented
        assert f"`{envvar}`" in documented


def test_every_cli_option_with_an_env_var_is_in_the_readme_table_and_nothing_else_is() -> None:
    """A new or renamed option fails here until docs/configuration.md (or sinks.md) documents it."""
    readme, cli = _readme_options(), _cli_options()

    assert sorted(readme) == sorted(cli)


def test_the_readme_table_names_each_option_s_real_env_var_and_default() -> None:
    """The default shown in each row is the one the CLI really uses."""
    readme, cli = _readme_options(), _cli_options()

    for key, option in cli.items():
        shown = option.show_default
        if isinstance(shown, str):
            assert f"`{shown}`" == readme[key], key
        elif shown is True and option.default not in (None, False):
            assert f"`{option.default}`" == readme[key], key


def _fenced_commands(section: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", _section(section))


def test_the_readme_test_command_is_what_ci_runs() -> None:
    """The second of the two commands is the last line of ``.ci/run``, verbatim after install."""
    demo, tests = _fenced_commands("Two commands")
    ci_lines = [
        line for line in (ROOT / ".ci/run").read_text().splitlines() if line and not line.startswith("#")
    ]

    assert "relayd demo" in demo
    install, run = (part.strip() for part in tests.split("&&"))
    assert ci_lines[-1] == run
    assert any(line.endswith(install.removeprefix("pip install ")) for line in ci_lines)


def test_ci_declares_itself_so_no_test_may_skip() -> None:
    """``.ci/run`` exports CI before the tests: support.ci_rules then turns any skip into a failure."""
    lines = (ROOT / ".ci/run").read_text().splitlines()
    exported = lines.index("export CI=true")
    tests = next(i for i, line in enumerate(lines) if line.startswith("python -m pytest"))
    assert exported < tests


def test_a_fresh_machine_installs_the_system_packages_with_the_script_ci_runs() -> None:
    """The README's test section names the one script that installs the Debian packages, and
    ``.ci/run`` runs that same script before the tests."""
    script = "scripts/install-system-packages.sh"
    ci_lines = (ROOT / ".ci/run").read_text().splitlines()

    assert f"`{script}`" in _section("Two commands")
    assert (ROOT / script).stat().st_mode & 0o111
    assert "apt-get install" in (ROOT / script).read_text()
    assert "apt-get" not in (ROOT / ".ci/run").read_text()
    assert ci_lines.index(script) < next(
        i for i, line in enumerate(ci_lines) if line.startswith("python -m pytest")
    )
