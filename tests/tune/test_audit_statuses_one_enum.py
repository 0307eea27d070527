"""An audited item's status is one :class:`AuditStatus` everywhere: the live audit's
findings, the counts, the fleet's reading of an audit document, the drift metrics' labels.
Its values are what the output always said, so the JSON keeps its bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dtnkit.fleet.load import Invalid, audit_from
from dtnkit.host.host import Host
from dtnkit.monitor.drift import DriftCollector
from dtnkit.tune.audit import Audit, run_audit
from dtnkit.tune.profile import load_profile
from dtnkit.tune.status import AuditStatus

HOSTS = Path(__file__).parents[1] / "fixtures" / "hosts"
VALUES = ["ok", "differs", "unsupported", "unknown", "host-scope"]


def audit(tree: str) -> Audit:
    return run_audit(Host.from_tree(HOSTS / tree, read_only=True), load_profile("dtn", ()))


def plain(doc: Any) -> Any:
    """``doc`` with every string (a status included) a plain ``str``."""
    if isinstance(doc, dict):
        return {str(k): plain(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [plain(v) for v in doc]
    return str(doc) if isinstance(doc, str) else doc


def test_the_enums_values_are_the_outputs_words_in_the_counts_order() -> None:
    assert [s.value for s in AuditStatus] == VALUES


@pytest.mark.parametrize("tree", ["dtn-a", "dtn-b"])
def test_every_finding_has_an_audit_status_and_the_json_is_plain(tree: str) -> None:
    result = audit(tree)
    assert result.findings
    assert all(type(f.status) is AuditStatus for f in result.findings)
    doc = result.as_dict()
    assert list(doc["counts"]) == VALUES
    assert sum(doc["counts"].values()) == len(result.findings)
    assert json.dumps(doc, indent=2) == json.dumps(plain(doc), indent=2)
    assert "AuditStatus" not in json.dumps(doc)


@pytest.mark.parametrize("tree", ["dtn-a", "dtn-b"])
def test_the_fleet_reads_back_the_same_statuses(tree: str) -> None:
    result = audit(tree)
    back = audit_from(json.loads(json.dumps(result.as_dict())), tree, f"{tree}.audit.json")
    assert [f.status for f in back.findings] == [f.status for f in result.findings]
    assert all(type(f.status) is AuditStatus for f in back.findings)
    assert back.compliant == result.compliant


@given(st.text(max_size=20) | st.sampled_from([*VALUES, "OK", "AuditStatus.OK", "host_scope"]))
def test_the_fleet_takes_exactly_the_five_statuses(status: str) -> None:
    doc = audit_doc()
    doc["findings"][0]["status"] = status
    if status in VALUES:
        assert audit_from(doc, "h", "h.audit.json").findings[0].status is AuditStatus(status)
    else:
        with pytest.raises(
            Invalid,
            match="not one of ok, differs, unsupported, unknown, "
            r"host-scope$",
        ):
            audit_from(doc, "h", "h.audit.json")


_DOC: dict[str, Any] = {}


def audit_doc() -> dict[str, Any]:
    """A real audit document of dtn-a (made once), as a fresh copy."""
    if not _DOC:
        _DOC.update(audit("dtn-a").as_dict())
    copy: dict[str, Any] = json.loads(json.dumps(_DOC))
    return copy


def test_the_drift_metrics_label_each_status_with_its_word() -> None:
    result = audit("dtn-a")
    metrics = DriftCollector(lambda view: result).collect(None)  # type: ignore[arg-type]
    families = {m.name: m for m in metrics}
    labels = [s.labels["status"] for s in families["dtnkit_tuning_items"].samples]
    assert all(type(v) is str for v in labels)
    assert sorted(set(labels)) == sorted(VALUES)
