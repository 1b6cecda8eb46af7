"""``relayd.config.environment``: which ``RELAYD_*`` variables are refused, and the line that says so."""

from __future__ import annotations

from relayd.config.environment import ALLOW_UNKNOWN, unknown_variable_error

KNOWN = {"RELAYD_SINK", "RELAYD_PREFIX", "RELAYD_ONCE"}


def test_known_and_foreign_variables_pass() -> None:
    env = {"RELAYD_SINK": "null", "relayd_prefix": "p", "PATH": "/bin", "REDIS_URL": "x"}

    assert unknown_variable_error(env, KNOWN) is None


def test_an_unknown_variable_names_the_closest_known_one() -> None:
    error = unknown_variable_error({"RELAYD_PREFXI": "p", "RELAYD_SINK": "null"}, KNOWN)

    assert error == (
        "unknown environment variable RELAYD_PREFXI (did you mean RELAYD_PREFIX?); "
        f"if it is meant for something else, list it in {ALLOW_UNKNOWN}"
    )


def test_nothing_close_gives_no_guess() -> None:
    error = unknown_variable_error({"RELAYD_ZZZZZZZZZZZ": "1"}, KNOWN)

    assert error is not None
    assert error.startswith("unknown environment variable RELAYD_ZZZZZZZZZZZ; ")


def test_the_escape_lists_variables_or_allows_all() -> None:
    env = {"RELAYD_OTHER": "1", "RELAYD_MORE": "2"}

    assert unknown_variable_error({**env, ALLOW_UNKNOWN: "relayd_other, RELAYD_MORE"}, KNOWN) is None
    assert unknown_variable_error({**env, ALLOW_UNKNOWN: "*"}, KNOWN) is None
    listed_one = unknown_variable_error({**env, ALLOW_UNKNOWN: "RELAYD_OTHER"}, KNOWN)
    assert listed_one is not None
    assert "RELAYD_MORE" in listed_one


def test_a_plugin_sink_owns_its_variables_and_is_asked_only_when_needed() -> None:
    asked: list[int] = []

    def prefixes() -> list[str]:
        asked.append(1)
        return ["pigeon", "my-sink"]

    assert unknown_variable_error({"RELAYD_SINK": "x"}, KNOWN, prefixes) is None
    assert asked == []
    env = {"RELAYD_PIGEON_BIRDS": "3", "RELAYD_MY_SINK_TOKEN_FILE": "/t"}
    assert unknown_variable_error(env, KNOWN, prefixes) is None
    assert unknown_variable_error({"RELAYD_PIGEONS": "3"}, KNOWN, prefixes) is not None


def test_kubernetes_service_links_of_a_service_named_relayd_pass() -> None:
    env = {
        "RELAYD_SERVICE_HOST": "10.0.0.7",
        "RELAYD_SERVICE_PORT": "9464",
        "RELAYD_SERVICE_PORT_METRICS": "9464",
        "RELAYD_PORT": "tcp://10.0.0.7:9464",
        "RELAYD_PORT_9464_TCP": "tcp://10.0.0.7:9464",
        "RELAYD_PORT_9464_TCP_PROTO": "tcp",
        "RELAYD_PORT_9464_TCP_PORT": "9464",
        "RELAYD_PORT_9464_TCP_ADDR": "10.0.0.7",
    }

    assert unknown_variable_error(env, KNOWN) is None
    assert unknown_variable_error({"RELAYD_PORTS": "1"}, KNOWN) is not None
