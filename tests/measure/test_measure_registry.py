"""The measure registry: probe kinds -> tools, tool names -> tools; it feeds the CLI's choices
and every probe run (``run_probe``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from click.testing import CliRunner

from dtnkit.cli.main import main
from dtnkit.cli.measure import diagnose, experiment, probe, results
from dtnkit.errors import BadInput, ExitStatus, ToolMissing
from dtnkit.host.host import Host
from dtnkit.measure import registry
from dtnkit.measure.probes.e2e import E2ESpec
from dtnkit.measure.tool import ToolContext, ToolRun


@dataclasses.dataclass
class FakeMover:
    """A mover that moves nothing: enough to see the registry wire a tool in."""

    name: str = "dkm-fake"
    kind: str = "e2e"
    about: str = "a fake mover for tests"
    package: str = "dkm-fake-package"
    ok: bool = True

    def can_run(self) -> tuple[bool, list[str]]:
        return (True, []) if self.ok else (False, ["dkm-fake is not installed"])

    def parse(self, text: str) -> dict[str, Any]:
        return {"bytes": int(text)}

    def run(self, host: Host, spec: E2ESpec, context: ToolContext) -> ToolRun:
        figures = self.parse("4096")
        return ToolRun(
            {**figures, "seconds": 1.0, "throughput_bps": 4096 * 8.0},
            "4096",
            resolved={"fake": True},
        )


def choices(command: Any, name: str) -> list[str]:
    (param,) = [p for p in command.params if p.name == name]
    return list(param.type.choices)


def test_every_probe_kind_has_its_default_tool() -> None:
    assert registry.probe_kinds() == ["net", "disk", "e2e"]
    for kind, p in registry.PROBES.items():
        assert p.default_tool in registry.tool_names(kind)
        assert registry.get_tool(p.default_tool, kind).kind == kind
    assert registry.tool_names("net") == ["iperf3"]
    assert registry.tool_names("disk") == ["fio"]
    assert registry.tool_names("e2e") == ["dtnkit-cp", "command"]
    assert registry.PROBES["e2e"].default_tool == "dtnkit-cp"


def test_the_cli_choices_come_from_the_registry() -> None:
    for kind in registry.probe_kinds():
        assert choices(probe.commands[kind], "tool") == registry.tool_names(kind)
    assert choices(experiment, "probe_kind") == registry.probe_kinds()
    # what is stored may also be a sweep's third-party copy: every tool's kind
    assert registry.measured_kinds() == ["net", "disk", "e2e", "tpc"]
    assert choices(results.commands["list"], "kind") == registry.measured_kinds()
    assert choices(results.commands["export"], "kind") == registry.measured_kinds()
    assert diagnose.name == "diagnose"


def test_a_tool_added_to_the_registry_is_a_cli_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    assert "dkm-fake" not in runner.invoke(probe, ["e2e", "--help"]).output
    monkeypatch.setitem(registry.TOOLS, "dkm-fake", FakeMover())
    assert "dkm-fake" in choices(probe.commands["e2e"], "tool")
    assert "dkm-fake" in runner.invoke(probe, ["e2e", "--help"]).output
    assert "dkm-fake" not in choices(probe.commands["net"], "tool")  # only for its kind


def test_a_registered_tool_runs_through_the_cli(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    monkeypatch.setitem(registry.TOOLS, "dkm-fake", FakeMover())
    capsys.readouterr()
    code = main(
        [
            "probe",
            "e2e",
            "a",
            "b",
            "--tool",
            "dkm-fake",
            "--db",
            str(tmp_path / "r.sqlite"),
            "--interval",
            "60",
            "--format",
            "json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == ExitStatus.OK, doc
    assert doc["spec"]["tool"] == "dkm-fake" and doc["spec"]["fake"] is True
    assert doc["summary"]["bytes"] == 4096 and doc["summary"]["throughput_bps"] == 32768.0
    assert (
        main(["probe", "e2e", "a", "b", "--tool", "nosuch", "--db", str(tmp_path / "r.sqlite")])
        == ExitStatus.USAGE
    )
    assert "'nosuch' is not one of 'dtnkit-cp', 'command', 'dkm-fake'" in capsys.readouterr().err


def test_a_tool_of_another_kind_is_refused() -> None:
    with pytest.raises(BadInput, match="no net tool 'fio'"):
        registry.get_tool("fio", "net")
    with pytest.raises(BadInput) as err:
        registry.get_tool("nosuch", "net")
    assert err.value.why == "tools: iperf3"


def test_a_tool_that_cannot_run_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.TOOLS, "dkm-fake", FakeMover(ok=False))
    with pytest.raises(ToolMissing) as err:
        registry.run_probe(Host.live(), E2ESpec("a", "b"), tool="dkm-fake")
    assert err.value.what == "the end-to-end probe cannot run"
    assert err.value.why == "dkm-fake is not installed"
    assert "install dkm-fake-package" in err.value.next_step


def test_run_probe_keeps_raw_output_and_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.TOOLS, "dkm-fake", FakeMover())
    r = registry.run_probe(Host.live(), E2ESpec("a", "b", interval_s=60), tool="dkm-fake")
    assert r.kind == "e2e" and r.raw == "4096"
    assert r.spec["tool"] == "dkm-fake" and r.spec["src"] == "a"
    for key in registry.PROBES["e2e"].summary_keys:
        assert key in r.summary
