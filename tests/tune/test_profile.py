"""Profiles: shipped data loads, merge is pure, bad profiles get one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from dtnkit.errors import BadInput
from dtnkit.tune.profile import GROUPS, KNOWN_KEYS, load_profile, merge, shipped_names


def test_shipped_profiles_load_and_every_item_has_a_source() -> None:
    assert shipped_names() == ["dtn", "measurement"]
    for name in shipped_names():
        prof = load_profile(name, ())
        assert prof.items
        for spec in prof.items.values():
            assert spec.source.strip()
            assert spec.group in GROUPS


def test_dtn_covers_every_group_and_known_key() -> None:
    prof = load_profile("dtn", ())
    assert set(prof.items) == set(KNOWN_KEYS)
    assert {s.group for s in prof.items.values()} == set(GROUPS)


def test_measurement_inherits_dtn_and_overrides_where_perfsonar_differs() -> None:
    dtn, meas = load_profile("dtn", ()), load_profile("measurement", ())
    assert meas.items["feature/*/tso"].value is False
    assert dtn.items["feature/*/tso"].value is True
    assert meas.items["coalesce/*/adaptive-rx"].value is False
    assert meas.params["bdp_multiplier"] > dtn.params["bdp_multiplier"]
    # untouched items come from dtn
    assert meas.items["sysctl/net.core.rmem_max"] == dtn.items["sysctl/net.core.rmem_max"]
    assert meas.files[0].endswith("dtn.toml")


def test_merge_is_pure_and_a_new_value_replaces_the_rule() -> None:
    base = {"params": {"a": 1}, "tune": {"k": {"rule": "bdp", "floor": 5, "source": "s"}}}
    over = {"tune": {"k": {"value": 3}}}
    out = merge(base, over)
    assert out["tune"]["k"] == {"floor": 5, "source": "s", "value": 3}
    assert base["tune"]["k"]["rule"] == "bdp"  # inputs untouched


def test_user_profile_can_shadow_and_include_the_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "dtn.toml").write_text(
        'include = ["dtn"]\n[tune."link/*/txqueuelen"]\nvalue = 20000\nsource = "our site"\n'
    )
    prof = load_profile("dtn", (tmp_path,))
    assert prof.items["link/*/txqueuelen"].value == 20000
    assert prof.items["link/*/txqueuelen"].source == "our site"
    assert prof.items["sysctl/net.ipv4.tcp_no_metrics_save"].value == 1


def test_extra_sysctl_needs_a_group_and_can_be_disabled(tmp_path: Path) -> None:
    ok = tmp_path / "site.toml"
    ok.write_text(
        'include = ["dtn"]\n[tune."sysctl/net.ipv4.tcp_notsent_lowat"]\n'
        'value = 131072\ngroup = "buffers"\nsource = "TuneD"\n'
        '[tune."check/smt"]\nenabled = false\n'
    )
    prof = load_profile(str(ok), ())
    assert prof.items["sysctl/net.ipv4.tcp_notsent_lowat"].group == "buffers"
    assert "check/smt" not in prof.items


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("schema = 2\n", "schema 2"),
        ("this is = not toml [", "not valid TOML"),
        ('[tune."sysctl/net.x"]\nvalue = 1\nsource = "s"\n', "unknown key"),
        (
            'include = ["dtn"]\n[tune."ring/*/rx"]\nvalue = 1\nrule = "hw_max"\nsource = "s"\n',
            "exactly one of",
        ),
        ('include = ["dtn"]\n[tune."ring/*/rx"]\nvalue = 1\nsource = ""\n', "no source"),
        (
            'include = ["dtn"]\n[tune."ring/*/rx"]\nvalue = 1\nmode = "lower"\nsource = "s"\n',
            "mode",
        ),
        (
            'include = ["dtn"]\n[tune."ring/*/rx"]\nvalue = 1\nsurprise = 1\nsource = "s"\n',
            "unknown fields",
        ),
        (
            'include = ["dtn"]\n[tune."sysctl/net.core.netdev_max_backlog"]\n'
            'tiers = { 50 = 1 }\nsource = "s"\n',
            "tier",
        ),
        ('include = ["dtn"]\n[params]\nbdp_multiplier = -1\n', "non-negative"),
        ('include = ["nosuch"]\n', "unknown profile"),
        ('[tune."ring/*/rx"]\nvalue = 1\nsource = "s"\n', "lacks parameters"),
        ('include = ["dtn"]\n[tune."ring/*/rx"]\nvalue = [1, 2]\nsource = "s"\n', "value must"),
    ],
)
def test_bad_profiles_get_one_clear_error(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(BadInput) as err:
        load_profile(str(path), ())
    assert fragment in err.value.render()


def test_include_loop_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('include = ["b"]\n')
    (tmp_path / "b.toml").write_text('include = ["a"]\n')
    with pytest.raises(BadInput, match="include loop"):
        load_profile("a", (tmp_path,))


def test_unknown_and_hostile_profile_names() -> None:
    with pytest.raises(BadInput, match="unknown profile"):
        load_profile("nosuch", ())
    with pytest.raises(BadInput, match="bad profile name"):
        load_profile("..\x00evil", ())
