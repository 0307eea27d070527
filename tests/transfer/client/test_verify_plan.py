"""The verify plan: modes and levels as str-valued enums, decisions derived once (pure)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from dtnkit.errors import BadInput
from dtnkit.transfer import pipeline as pl
from dtnkit.transfer.client.request import CopyRequest, CopyRun, FileResult, Summary
from dtnkit.transfer.client.verify import Level, Verify, VerifyPlan
from dtnkit.transfer.wire import digests as dg


def test_enums_keep_the_cli_and_json_strings() -> None:
    assert [v.value for v in Verify] == list(pl.VERIFY_MODES)
    assert [lv.value for lv in Level] == list(pl.LEVELS)
    assert Verify("block") is Verify.BLOCK and Verify.BLOCK == "block"
    assert f"{Level.ONDISK}" == "ondisk" and json.dumps([Verify.FILE]) == '["file"]'


def test_a_request_turns_strings_into_enums() -> None:
    options = CopyRequest(verify="file", level="durable")  # type: ignore[arg-type]
    assert options.verify is Verify.FILE and options.level is Level.DURABLE
    with pytest.raises(BadInput, match="--verify fast") as exc:
        CopyRequest(verify="fast")  # type: ignore[arg-type]
    assert exc.value.why == "unknown mode"
    assert exc.value.next_step == "use one of none, sequential, file, block"
    with pytest.raises(BadInput, match="--verify-level cloud") as exc:
        CopyRequest(level="cloud")  # type: ignore[arg-type]
    assert exc.value.next_step == "use one of inflight, durable, ondisk"


@pytest.mark.parametrize("verify", list(Verify))
@pytest.mark.parametrize("level", list(Level))
def test_plan_decisions(verify: Verify, level: Level) -> None:
    plan = VerifyPlan.of(verify.value, level.value, "adler32")
    assert (plan.verify, plan.level) == (verify, level)
    assert plan.checks == (verify != "none")
    assert plan.block == (verify == "block")
    assert plan.sequential == (verify == "sequential")
    assert plan.hash_file_after == (verify in ("sequential", "file"))
    assert plan.source_digest_in_background == (verify in ("file", "block"))
    assert plan.fsync == (level in ("durable", "ondisk"))
    assert plan.ondisk == (level == "ondisk")
    assert plan.reread_from_disk == (level == "ondisk" and verify != "none")
    assert plan.device_ok == (verify in ("none", "block") and level == "inflight")
    assert plan.upload_level == ("durable" if verify != "none" else "inflight")
    assert plan.unverified_level == ("durable" if level != "inflight" else "inflight")
    assert plan.session_algorithm == (None if verify == "none" else "adler32")


def test_plan_follows_a_request_with_verify_lowered() -> None:
    """A TPC copy lowers verify for its transfer: a new request (the one asked is frozen),
    whose plan sees it."""
    options = CopyRequest()
    assert options.verify_plan().block
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.verify = Verify.NONE  # type: ignore[misc]
    assert not dataclasses.replace(options, verify=Verify.NONE).verify_plan().checks


def test_digest_is_bytes_formatted_only_when_shown() -> None:
    raw = bytes.fromhex("0a0b0c0d")
    result = FileResult("s", "d", 3, raw, Level.DURABLE, algorithm="adler32")
    assert result.digest == raw and result.shown_digest() == "0a0b0c0d"
    assert dg.format_value("sha256", bytes(32)).endswith("=")  # base64, as in a Digest header
    options = CopyRequest(checksum="md5", verify=Verify.FILE)
    doc = Summary(CopyRun.of(options), [result], 1.0).as_dict()
    assert doc["digest"] == "0a0b0c0d"  # the result's own algorithm, not the options'
    assert doc["verify"] == "file" and doc["level"] == "durable"
    assert json.loads(json.dumps(doc))["level"] == "durable"
    unverified = FileResult("s", "d", 3, None, Level.INFLIGHT)
    assert unverified.shown_digest() is None
    assert Summary(CopyRun.of(options), [unverified, result]).as_dict()["level"] == "inflight"
