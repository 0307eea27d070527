"""The shipped alert rules: promtool checks them, unit-tests them with series that cross and
do not cross every threshold, and lints the exposition of a real collection."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.monitor.build import rules_text

HERE = Path(__file__).parent
ALERTS = (
    "DtnkitStreamUtilisationHigh",
    "DtnkitTcpRetransmitHigh",
    "DtnkitContextSwitchesHigh",
    "DtnkitNicRxDropsHigh",
    "DtnkitTuningDrift",
    "DtnkitExporterDown",
    "DtnkitCollectorFailing",
)

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="needs promtool (Debian package prometheus)"
)


def _rules() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(rules_text())
    return doc


def _alerts(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}


def _unit_tests(rules_file: Path, rules: dict[str, Any]) -> dict[str, Any]:
    """rules_test.yml with the rule file's path, and each expected alert's description and
    runbook filled from the rule when the test does not give them (static text)."""
    doc: dict[str, Any] = yaml.safe_load((HERE / "rules_test.yml").read_text())
    doc["rule_files"] = [str(rules_file)]
    alerts = _alerts(rules)
    for group in doc["tests"]:
        for case in group.get("alert_rule_test", []):
            rule = alerts[case["alertname"]]
            for exp in case["exp_alerts"]:
                ann = exp.setdefault("exp_annotations", {})
                for key in ("description", "runbook", "runbook_url"):
                    ann.setdefault(key, rule["annotations"][key])
    return doc


def _promtool_test(tmp_path: Path, rules: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump(rules, sort_keys=False))
    tests_file = tmp_path / "tests.yml"
    tests_file.write_text(yaml.safe_dump(_unit_tests(rules_file, rules), sort_keys=False))
    return subprocess.run(
        ["promtool", "test", "rules", str(tests_file)], capture_output=True, text=True, timeout=120
    )


def test_promtool_check_rules_accepts_the_shipped_file(tmp_path: Path) -> None:
    path = tmp_path / "dtnkit-alerts.yml"
    path.write_text(rules_text())
    res = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 11 rules found" in res.stdout


def test_print_rules_prints_the_shipped_file(environment: Environment) -> None:
    assert main(["exporter", "--print-rules"], environment) == 0
    assert taken(environment.stdout) == rules_text()


def test_every_alert_has_a_summary_and_a_runbook_and_a_unit_test() -> None:
    alerts = _alerts(_rules())
    assert set(alerts) == set(ALERTS)
    tested = yaml.safe_load((HERE / "rules_test.yml").read_text())
    fires, quiet = set(), set()
    for group in tested["tests"]:
        for case in group.get("alert_rule_test", []):
            (fires if case["exp_alerts"] else quiet).add(case["alertname"])
    for name, rule in alerts.items():
        assert rule["annotations"]["summary"] and len(rule["annotations"]["runbook"]) > 40
        assert name in fires and name in quiet, f"{name}: a case that fires and one that does not"


def test_promtool_test_rules_crossing_and_not_crossing_each_threshold(tmp_path: Path) -> None:
    res = _promtool_test(tmp_path, _rules())
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


@pytest.mark.parametrize(
    ("alert", "old", "new"),
    [
        ("DtnkitTcpRetransmitHigh", "> 0.05", "> 0.1"),
        ("DtnkitContextSwitchesHigh", "> 50000", "> 52000"),
        ("DtnkitNicRxDropsHigh", "> 1000", "> 800"),
        ("DtnkitStreamUtilisationHigh", "> 0.75", "> 0.8"),
    ],
)
def test_the_unit_tests_catch_a_moved_threshold(
    tmp_path: Path, alert: str, old: str, new: str
) -> None:
    """The control: the same unit tests against rules with one threshold moved must fail."""
    rules = copy.deepcopy(_rules())
    rule = _alerts(rules)[alert]
    assert old in rule["expr"]
    rule["expr"] = rule["expr"].replace(old, new)
    res = _promtool_test(tmp_path, rules)
    assert res.returncode == 1, res.stdout
    assert f"alertname: {alert}" in res.stdout + res.stderr


def test_promtool_check_metrics_lints_a_real_collection(environment: Environment) -> None:
    assert main(["metrics", "--format", "prom", "--no-drift"], environment) == 0
    text = taken(environment.stdout)
    assert "dtnkit_tcp_dsacks_received_total " in text
    res = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stdout + res.stderr
