"""A checklist item's status is one :class:`ChecklistStatus`, as an audited item's is one
``AuditStatus``: the items a captured host's checklist judges, the counts, the JSON and the
table.  Its values are what the output always said, so the JSON keeps its bytes; an item's
status only gets worse."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.conftest import HOSTS, taken

from dtnkit.cli.main import main
from dtnkit.diagnose.checklist import Options, run_checklist
from dtnkit.diagnose.checklist.base import ChecklistStatus, Item
from dtnkit.environment import Environment
from dtnkit.host.host import Host
from dtnkit.tune.judging import Judging

VALUES = ["pass", "warn", "fail"]


def plain(doc: Any) -> Any:
    """``doc`` with every string (a status included) a plain ``str``."""
    if isinstance(doc, dict):
        return {str(k): plain(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [plain(v) for v in doc]
    return str(doc) if isinstance(doc, str) else doc


def test_the_enums_values_are_the_outputs_words_best_first() -> None:
    assert [s.value for s in ChecklistStatus] == VALUES


@pytest.mark.parametrize("tree", ["dtn-a", "dtn-b"])
def test_every_item_has_a_checklist_status_and_the_json_is_plain(tree: str) -> None:
    host = Host.from_tree(HOSTS / tree, read_only=True)
    result = run_checklist(host, Judging(tree=HOSTS / tree), Options())
    assert result.items
    assert all(type(i.status) is ChecklistStatus for i in result.items)
    doc = result.as_dict()
    assert list(doc["counts"]) == VALUES
    assert sum(doc["counts"].values()) == len(result.items)
    assert doc["ok"] == (doc["counts"]["fail"] == 0)
    assert json.dumps(doc, indent=2) == json.dumps(plain(doc), indent=2)
    assert "ChecklistStatus" not in json.dumps(doc)


def test_the_command_shows_the_words(environment: Environment) -> None:
    code = main(["checklist", "--tree", str(HOSTS / "dtn-a"), "--format", "json"], environment)
    taken(environment.stderr)
    doc = json.loads(taken(environment.stdout))
    assert code == 3  # dtn-a is an untuned host: an item fails
    assert {i["status"] for i in doc["items"]} <= set(VALUES)
    assert "fail" in {i["status"] for i in doc["items"]}
    main(["checklist", "--tree", str(HOSTS / "dtn-a")], environment)
    table = taken(environment.stdout)
    assert "fail" in table and "ChecklistStatus" not in table


@given(st.lists(st.sampled_from(list(ChecklistStatus)), max_size=8))
def test_an_items_status_only_gets_worse(seen: list[ChecklistStatus]) -> None:
    item = Item("x", "dc27", "x")
    for status in seen:
        item.worst(status)
    assert item.status is max([ChecklistStatus.PASS, *seen], key=list(ChecklistStatus).index)
