"""The alert rules and the Grafana dashboard name only series that a running relayd exports.

Every PromQL expression is parsed with a real PromQL parser (``promql-parser``); each vector
selector's metric name and label matchers, and each ``by (...)`` grouping, are checked against
docs/metrics.md and then against a scrape of a real ``relayd sweep`` subprocess. ``promtool`` checks
and unit-tests the rules where it is installed.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client.metrics_core import Metric
from support.binaries import require_binaries
from support.markdown import unresolved

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "relayd-rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "relayd-rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "relayd-dashboard.json"
RUNBOOK = ROOT / "docs" / "runbook.md"

#: docs/metrics.md: every metric relayd exports and its labels. ``relayd_build_info`` also carries
#: ``python`` (bounded: one value per process), which docs/metrics.md leaves open.
DOCUMENTED_METRICS: dict[str, tuple[str, frozenset[str]]] = {
    "relayd_delivered_total": ("counter", frozenset({"prefix", "kind"})),
    "relayd_delivery_attempts_total": ("counter", frozenset({"prefix", "kind", "outcome"})),
    "relayd_dead_lettered_total": ("counter", frozenset({"prefix", "kind", "reason"})),
    "relayd_backlog_entries": ("gauge", frozenset({"prefix", "kind"})),
    "relayd_dead_letters": ("gauge", frozenset({"prefix", "kind"})),
    "relayd_oldest_due_age_seconds": ("gauge", frozenset({"prefix", "kind"})),
    "relayd_timer_lag_seconds": ("histogram", frozenset({"prefix"})),
    "relayd_sink_latency_seconds": ("histogram", frozenset({"prefix", "kind"})),
    "relayd_sweep_duration_seconds": ("histogram", frozenset({"prefix"})),
    "relayd_redis_errors_total": ("counter", frozenset({"prefix"})),
    "relayd_active": ("gauge", frozenset({"prefix"})),
    "relayd_lease_transitions_total": ("counter", frozenset({"prefix", "event"})),
    "relayd_last_sweep_timestamp_seconds": ("gauge", frozenset({"prefix"})),
    "relayd_paused_since_timestamp_seconds": ("gauge", frozenset({"prefix", "scope"})),
    "relayd_commit_to_delivery_seconds": ("histogram", frozenset({"prefix", "kind"})),
    "relayd_events_total": ("counter", frozenset({"outcome"})),
    "relayd_build_info": ("info", frozenset({"version", "python"})),
}
#: Series Prometheus synthesises per scrape target; relayd cannot export them.
PROMETHEUS_SERIES: dict[str, frozenset[str]] = {"up": frozenset()}
#: Labels Prometheus attaches to every scraped series (target labels).
TARGET_LABELS = frozenset({"instance", "job"})
#: Grafana's built-in interval variables, replaced by a duration before parsing.
GRAFANA_DURATIONS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
_LABEL_VALUES = re.compile(r"label_values\(\s*(\w+)\s*,\s*(\w+)\s*\)")


def series_labels() -> dict[str, frozenset[str]]:
    """Every series name the documented metrics produce in Prometheus, with its labels."""
    series: dict[str, frozenset[str]] = dict(PROMETHEUS_SERIES)
    for name, (kind, labels) in DOCUMENTED_METRICS.items():
        if kind == "histogram":
            series[f"{name}_bucket"] = labels | {"le"}
            series[f"{name}_sum"] = labels
            series[f"{name}_count"] = labels
        else:
            series[name] = labels
    return series


@dataclass(frozen=True)
class Selector:
    """One vector selector: the series name and the labels its matchers name."""

    name: str
    labels: frozenset[str]


@dataclass(frozen=True)
class Query:
    """One PromQL expression from a rule or a dashboard panel, taken apart."""

    source: str
    expr: str
    selectors: tuple[Selector, ...]
    #: For each ``by (...)`` aggregation: its labels and the series names aggregated.
    groupings: tuple[tuple[frozenset[str], frozenset[str]], ...]


def _selectors_of(expr: promql_parser.Expr) -> list[Selector]:
    found: list[Selector] = []

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            matchers = node.matchers.matchers
            name = node.name or next(m.value for m in matchers if m.name == "__name__")
            found.append(Selector(name, frozenset(m.name for m in matchers if m.name != "__name__")))
        return True

    promql_parser.walk(expr, visit)
    return found


def parse_query(source: str, text: str) -> Query:
    """Parse ``text`` (Grafana interval variables replaced) into its selectors and groupings."""
    for variable, duration in GRAFANA_DURATIONS.items():
        text = text.replace(variable, duration)
    try:
        expr = promql_parser.parse(text)
    except ValueError as exc:
        pytest.fail(f"{source}: PromQL does not parse ({exc}): {text}")
    groupings: list[tuple[frozenset[str], frozenset[str]]] = []

    def visit(node: promql_parser.Expr) -> bool:
        if (
            isinstance(node, promql_parser.AggregateExpr)
            and node.modifier is not None
            and node.modifier.type == promql_parser.AggModifierType.By
        ):
            beneath = frozenset(s.name for s in _selectors_of(node.expr))
            groupings.append((frozenset(node.modifier.labels), beneath))
        return True

    promql_parser.walk(expr, visit)
    return Query(source, text, tuple(_selectors_of(expr)), tuple(groupings))


def rule_queries() -> list[Query]:
    """Every rule expression of deploy/prometheus/relayd-rules.yml."""
    doc = yaml.safe_load(RULES.read_text())
    return [
        parse_query(f"rule {rule.get('alert') or rule.get('record')}", rule["expr"])
        for group in doc["groups"]
        for rule in group["rules"]
    ]


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard_queries() -> list[Query]:
    """Every panel target of the dashboard, plus the templating queries (label_values)."""
    doc = json.loads(DASHBOARD.read_text())
    queries = [
        parse_query(f"panel {panel['title']!r} target {target['refId']}", target["expr"])
        for panel in _panels(doc["panels"])
        for target in panel.get("targets", [])
    ]
    for variable in doc["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        match = _LABEL_VALUES.fullmatch(query.strip())
        assert match, f"variable {variable['name']}: only label_values(metric, label) is supported"
        source = f"variable {variable['name']}"
        queries.append(Query(source, query, (Selector(match[1], frozenset({match[2]})),), ()))
    return queries


def all_queries() -> list[Query]:
    return rule_queries() + dashboard_queries()


def naming_problems(queries: list[Query], known: dict[str, frozenset[str]]) -> list[str]:
    """Selectors of unknown series, matchers or groupings on labels those series lack."""
    problems = []
    for query in queries:
        for selector in query.selectors:
            if selector.name not in known:
                problems.append(f"{query.source}: unknown series {selector.name}")
            elif not selector.labels <= known[selector.name] | TARGET_LABELS:
                extra = sorted(selector.labels - known[selector.name] - TARGET_LABELS)
                problems.append(f"{query.source}: {selector.name} has no label {extra}")
        for labels, names in query.groupings:
            available = TARGET_LABELS.union(*(known.get(name, frozenset()) for name in names))
            if not labels <= available:
                problems.append(
                    f"{query.source}: groups by {sorted(labels - available)} that {sorted(names)} lack"
                )
    return problems


# --- static checks against docs/metrics.md ---------------------------------------------------------


def test_every_rule_and_panel_names_only_design_series_and_their_labels() -> None:
    """A typo in a metric or label name, or a by() on a missing label, is caught without a scrape."""
    queries = all_queries()

    problems = naming_problems(queries, series_labels())

    assert len(queries) > 20
    assert problems == []


def test_the_name_check_catches_unknown_series_labels_and_groupings() -> None:
    """The checker itself: each kind of mistake is reported (so a silent checker cannot pass)."""
    queries = [
        parse_query("typo", "rate(relayd_deliverd_total[5m])"),
        parse_query("label", 'relayd_active{kind="outbox"}'),
        parse_query("grouping", "sum by (kind) (relayd_active)"),
        parse_query(
            "fine", 'sum by (prefix, le) (rate(relayd_timer_lag_seconds_bucket{prefix=~"$prefix"}[5m]))'
        ),
    ]

    problems = naming_problems(queries, series_labels())

    assert [p.split(":")[0] for p in problems] == ["typo", "label", "grouping"]


def test_rules_have_for_severity_summary_description_and_runbook() -> None:
    """Every alert waits (for), is routed (severity), explains itself and links its runbook."""
    doc = yaml.safe_load(RULES.read_text())
    alerts = [rule for group in doc["groups"] for rule in group["rules"]]

    missing = [
        rule["alert"]
        for rule in alerts
        if not (
            re.fullmatch(r"\d+[smh]", str(rule.get("for", "")))
            and rule.get("labels", {}).get("severity") in {"critical", "warning", "info"}
            and rule.get("annotations", {}).get("summary")
            and rule.get("annotations", {}).get("description")
            and rule.get("annotations", {}).get("runbook_url", "").startswith("docs/runbook.md#")
        )
    ]

    assert all("alert" in rule for rule in alerts)
    assert missing == []


def test_rules_cover_every_alert_the_issue_asks_for() -> None:
    """Backlog growth, timer lag, dead letters, no active replica, relayd down, Redis errors."""
    by_series: dict[str, set[str]] = {}
    for query in rule_queries():
        for selector in query.selectors:
            by_series.setdefault(selector.name, set()).add(query.source)

    required = {
        "relayd_backlog_entries",
        "relayd_timer_lag_seconds_bucket",
        "relayd_dead_lettered_total",
        "relayd_active",
        "relayd_build_info",
        "up",
        "relayd_redis_errors_total",
    }

    assert required <= set(by_series)


def test_every_runbook_anchor_exists_in_the_runbook() -> None:
    """runbook_url anchors resolve: docs/runbook.md has a heading (GitHub slug) or element with that id."""
    doc = yaml.safe_load(RULES.read_text())
    targets = {rule["annotations"]["runbook_url"] for group in doc["groups"] for rule in group["rules"]}

    missing = sorted(t for t in targets if unresolved(t, ROOT / "README.md") is not None)

    assert missing == []


def test_dashboard_panels_cover_the_operator_questions() -> None:
    """Backlog, delivery rate, timer lag percentiles, sink latency, dead letters, active replica,
    Redis errors: each has a panel query."""
    used = {s.name for q in dashboard_queries() for s in q.selectors}
    lag_quantiles = {
        q.expr.split(",")[0]
        for q in dashboard_queries()
        if any(s.name == "relayd_timer_lag_seconds_bucket" for s in q.selectors)
    }

    assert {
        "relayd_backlog_entries",
        "relayd_delivered_total",
        "relayd_timer_lag_seconds_bucket",
        "relayd_sink_latency_seconds_bucket",
        "relayd_dead_letters",
        "relayd_dead_lettered_total",
        "relayd_active",
        "relayd_redis_errors_total",
    } <= used
    assert lag_quantiles == {"histogram_quantile(0.5", "histogram_quantile(0.9", "histogram_quantile(0.99"}


def test_dashboard_filters_every_prefixed_series_by_the_prefix_variable() -> None:
    """The prefix variable is multi-valued with All, and every panel honours it."""
    doc = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    unfiltered = [
        f"{panel['title']}: {target['expr']}"
        for panel in _panels(doc["panels"])
        for target in panel.get("targets", [])
        for selector in parse_query(panel["title"], target["expr"]).selectors
        if "prefix" in series_labels()[selector.name] and 'prefix=~"$prefix"' not in target["expr"]
    ]
    datasources = {
        json.dumps(panel["datasource"], sort_keys=True)
        for panel in _panels(doc["panels"])
        if "datasource" in panel
    }

    assert variables["prefix"]["multi"] is True
    assert variables["prefix"]["includeAll"] is True
    assert variables["datasource"]["query"] == "prometheus"
    assert unfiltered == []
    assert datasources == {json.dumps({"type": "prometheus", "uid": "${datasource}"}, sort_keys=True)}


def test_promtool_checks_and_unit_tests_the_rules() -> None:
    """promtool accepts the rules and its unit tests (deploy/prometheus/relayd-rules.test.yml) pass."""
    promtool = require_binaries("promtool")["promtool"]  # Debian package 'prometheus'

    check = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    unit = subprocess.run(
        [promtool, "test", "rules", str(RULE_TESTS)],
        capture_output=True,
        text=True,
        check=False,
        cwd=RULES.parent,
    )

    assert check.returncode == 0, check.stdout + check.stderr
    assert unit.returncode == 0, unit.stdout + unit.stderr


# --- against a running relayd ------------------------------------------------------------------


def exported_series(families: list[Metric]) -> dict[str, frozenset[str]]:
    """Every series name a scrape of these families can give Prometheus, with its labels."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "info": ("_info",),
    }
    series: dict[str, set[str]] = {}
    for family in families:
        for suffix in suffixes.get(family.type, ("",)):
            series.setdefault(family.name + suffix, set())
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(labels) for name, labels in series.items()}


def test_a_running_relayd_exports_every_design_metric_with_its_labels(relayd_families: list[Metric]) -> None:
    """The table above is what relayd really exports, labels included, so the static
    checks are checks against reality."""
    exported = exported_series(relayd_families)
    design = series_labels()

    missing = sorted(name for name in design if name not in PROMETHEUS_SERIES and name not in exported)
    label_drift = {
        name: sorted(exported[name] ^ labels)
        for name, labels in design.items()
        if name in exported and exported[name] and exported[name] != labels
    }

    assert missing == []
    assert label_drift == {}


def test_rules_and_dashboard_name_only_series_a_running_relayd_exports(relayd_families: list[Metric]) -> None:
    """Scrape-checked: every name and label the rules and the dashboard use is really exported."""
    exported = exported_series(relayd_families)
    # Series relayd exports without samples yet fall back to their documented labels.
    known = {
        name: labels or series_labels().get(name, frozenset()) for name, labels in exported.items()
    } | PROMETHEUS_SERIES

    problems = naming_problems(all_queries(), known)

    assert problems == []
