"""The image test's helper reads the Debian mirror from apt's sources in either format."""

from __future__ import annotations

from support.docker import DEFAULT_MIRROR, debian_mirror

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def test_a_deb822_stanza_serving_the_suite_names_the_mirror() -> None:
    sources = [("nodesource.sources", "Types: deb\nURIs: https://other.example\nSuites: nodistro\n")]

    assert debian_mirror([*sources, ("debian.sources", DEB822)]) == "http://mirror.example/debian"


def test_a_one_line_entry_with_options_names_the_mirror() -> None:
    text = (
        "# deb http://old.example/debian bookworm main\n"
        "deb [arch=amd64] http://one.example/debian bookworm main\n"
    )

    assert debian_mirror([("sources.list", text)]) == "http://one.example/debian"


def test_disabled_files_and_other_suites_fall_back_to_the_default() -> None:
    sources = [
        ("cloud.list.disabled-by-farm", "deb http://x.example/debian bookworm main\n"),
        ("sources.list", "deb http://y.example/debian trixie main\n"),
    ]

    assert debian_mirror(sources) == DEFAULT_MIRROR
