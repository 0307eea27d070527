"""The pure parsers behind `dtnkit checklist` (dtnkit.diagnose.sitecfg): real outputs, and
fuzzing: any text gives an answer or BadInput, never another exception."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.diagnose import sitecfg
from dtnkit.errors import BadInput, DtnkitError

# ---- --peer -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want", "family"),
    [
        ("dtn2.example.org", "dtn2.example.org", None),
        ("dtn2.example.org.", "dtn2.example.org.", None),
        ("localhost", "localhost", None),
        ("192.0.2.7", "192.0.2.7", 4),
        ("2001:db8::7", "2001:db8::7", 6),
        ("[2001:db8::7]", "2001:db8::7", 6),
        ("2001:DB8:0::7", "2001:db8::7", 6),
        ("fe80::1%eth0", "fe80::1%eth0", 6),
        ("  dtn2  ", "dtn2", None),
        ("dtn2\n", "dtn2", None),
    ],
)
def test_peer_accepts_names_and_literals(text: str, want: str, family: int | None) -> None:
    peer = sitecfg.parse_peer(text)
    assert (peer.text, peer.family) == (want, family)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "-c1000",
        "--help",
        "dtn2 -f",
        "a;rm -rf /",
        "$(id)",
        "x\x00y",
        "host:2811",
        "http://dtn2/",
        "1.2.3",
        "999.1.1.1",
        "0.0.0.0",
        "::",
        "ff02::1",
        "224.0.0.1",
        "a..b",
        "-dtn2",
        "dtn2-.org",
        "a" * 64 + ".org",
        "a." * 130,
        "fe80::1%eth 0",
        "192.0.2.1%eth0",
        "[::1",
        "2001:db8:::1",
        "dtn_2.org",
        "ünï.org",
    ],
)
def test_peer_refuses_what_is_neither(text: str) -> None:
    with pytest.raises(BadInput) as err:
        sitecfg.parse_peer(text)
    assert err.value.next_step  # one line that says what to give


@given(st.text(max_size=300))
@settings(max_examples=400, deadline=None)
def test_peer_fuzz_never_lets_an_option_or_a_blank_through(text: str) -> None:
    try:
        peer = sitecfg.parse_peer(text)
    except BadInput:
        return
    assert not peer.text.startswith("-")
    assert not any(c.isspace() or not c.isprintable() for c in peer.text)
    assert 0 < len(peer.text) <= 253


@pytest.mark.parametrize(
    "url",
    ["https://ps.example.org", "http://[2001:db8::1]:8080/x", "https://ps.example.org/pscheduler"],
)
def test_url_accepts_http(url: str) -> None:
    assert sitecfg.check_url(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "",
        "ps.example.org",
        "ftp://ps",
        "https://",
        "-K/etc/x",
        "https://ps:99999",
        "https://a b",
        "file:///etc/passwd",
        "https://ps\n",
    ],
)
def test_url_refuses_others(url: str) -> None:
    with pytest.raises(BadInput):
        sitecfg.check_url(url)


@given(st.text(max_size=200))
@settings(max_examples=300, deadline=None)
def test_url_fuzz(text: str) -> None:
    with contextlib.suppress(BadInput):
        assert sitecfg.check_url(text).startswith(("http://", "https://"))


# ---- getent, ping, ip route get -----------------------------------------------------------------


def test_getent_ahosts_both_families_once_each() -> None:
    text = (
        "2001:db8::7     STREAM dtn2.example.org\n2001:db8::7     DGRAM  \n"
        "2001:db8::7     RAW    \n192.0.2.7       STREAM \n192.0.2.7       DGRAM\n"
        "::ffff:198.51.100.1 STREAM\ngarbage\n\n"
    )
    assert sitecfg.parse_getent_hosts(text) == ["2001:db8::7", "192.0.2.7", "198.51.100.1"]


PING_OK = """PING 192.0.2.2 (192.0.2.2) 1472(1500) bytes of data.
1480 bytes from 192.0.2.2: icmp_seq=1 ttl=64 time=0.061 ms
1480 bytes from 192.0.2.2: icmp_seq=2 ttl=64 time=0.050 ms

--- 192.0.2.2 ping statistics ---
2 packets transmitted, 2 received, 0% packet loss, time 201ms
"""
PING_LOCAL_TOO_LONG = """PING 127.0.0.1 (127.0.0.1) 65508(65536) bytes of data.

--- 127.0.0.1 ping statistics ---
1 packets transmitted, 0 received, +1 errors, 100% packet loss, time 0ms

ping: local error: message too long, mtu=65535
"""
PING_FRAG = """PING 198.51.100.9 (198.51.100.9) 8972(9000) bytes of data.
From 192.0.2.254 icmp_seq=1 Frag needed and DF set (mtu = 1500)

--- 198.51.100.9 ping statistics ---
2 packets transmitted, 0 received, +1 errors, 100% packet loss, time 201ms
"""
PING6_TOO_BIG = """PING 2001:db8::9(2001:db8::9) 8952 data bytes
From 2001:db8::fe icmp_seq=1 Packet too big: mtu=1480

--- 2001:db8::9 ping statistics ---
2 packets transmitted, 0 received, +1 errors, 100% packet loss, time 201ms
"""


@pytest.mark.parametrize(
    ("rc", "text", "replied", "hint", "note"),
    [
        (0, PING_OK, True, None, "reply"),
        (1, PING_LOCAL_TOO_LONG, False, 65535, "ping: local error: message too long, mtu=65535"),
        (
            1,
            PING_FRAG,
            False,
            1500,
            "From 192.0.2.254 icmp_seq=1 Frag needed and DF set (mtu = 1500)",
        ),
        (1, PING6_TOO_BIG, False, 1480, "From 2001:db8::fe icmp_seq=1 Packet too big: mtu=1480"),
        (
            2,
            "ping: c19-nosuch.invalid: Name or service not known\n",
            False,
            None,
            "ping: c19-nosuch.invalid: Name or service not known",
        ),
        (0, "", False, None, "no reply"),  # rc 0 alone is not a reply
        (
            1,
            "PING 192.0.2.2 (192.0.2.2) 8972(9000) bytes of data.\n"
            "ping: sendmsg: No buffer space available\n\n--- 192.0.2.2 ping statistics ---\n"
            "2 packets transmitted, 0 received, 100% packet loss, time 1001ms\n",
            False,
            None,
            "ping: sendmsg: No buffer space available",
        ),  # a veth refusing a frame above its MTU
    ],
)
def test_ping_outcomes(rc: int, text: str, replied: bool, hint: int | None, note: str) -> None:
    out = sitecfg.parse_ping(rc, text)
    assert (out.replied, out.mtu_hint, out.note) == (replied, hint, note)


def test_route_get() -> None:
    got = sitecfg.parse_route_get(
        '[{"dst":"192.0.2.2","dev":"c19a","prefsrc":"192.0.2.1","flags":[],"uid":0,"cache":[]}]'
    )
    assert got == sitecfg.RouteTo("c19a", None, "unicast")
    cached = sitecfg.parse_route_get(
        '[{"dst":"198.51.100.9","gateway":"192.0.2.254","dev":'
        '"eth0","metrics":[{"mtu":1400}],"cache":["expires"]}]'
    )
    assert cached == sitecfg.RouteTo("eth0", 1400, "unicast")
    assert sitecfg.parse_route_get(
        '[{"type":"unreachable","dst":"2001:db8::9"}]'
    ) == sitecfg.RouteTo(None, None, "unreachable")
    for bad in ("", "[]", "{}", "[1]", "not json", '[{"dev": 3, "mtu": true}]', "[" * 5000):
        out = sitecfg.parse_route_get(bad)
        assert out is None or (out.dev is None and out.pmtu is None)


@given(st.integers(-5, 300), st.text(max_size=500))
@settings(max_examples=300, deadline=None)
def test_ping_and_route_fuzz(rc: int, text: str) -> None:
    out = sitecfg.parse_ping(rc, text)
    assert out.mtu_hint is None or 68 <= out.mtu_hint <= 65535
    assert len(out.note) <= 120
    sitecfg.parse_route_get(text)
    sitecfg.parse_getent_hosts(text)


# ---- processes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "prog", "args"),
    [
        (
            "/usr/bin/flowd-go\0--conf\0/etc/flowd-go/conf.yaml\0run\0",
            "flowd-go",
            ["--conf", "/etc/flowd-go/conf.yaml", "run"],
        ),
        (
            "/usr/bin/python3\0/usr/bin/flowd\0-c\0/etc/flowd/flowd.cfg\0",
            "flowd",
            ["-c", "/etc/flowd/flowd.cfg"],
        ),
        (
            "/opt/venv/bin/python3.11\0-I\0-m\0dtnkit\0serve\0--scitag\x00130\0/data\0",
            "dtnkit",
            ["serve", "--scitag", "130", "/data"],
        ),
        (
            "ip\0netns\0exec\0c19a\0dtnkit\0exporter\0--listen\0:0\0",
            "dtnkit",
            ["exporter", "--listen", ":0"],
        ),
        (
            "/usr/bin/xrootd\0-c\0/etc/xrootd/xrootd-http.cfg\0-l\0/var/log/x\0",
            "xrootd",
            ["-c", "/etc/xrootd/xrootd-http.cfg", "-l", "/var/log/x"],
        ),
        ("", "", []),
        ("python3\0", "python3", []),
    ],
)
def test_program_of_a_cmdline(raw: str, prog: str, args: list[str]) -> None:
    assert sitecfg.program(sitecfg.cmdline_argv(raw)) == (prog, args)


def test_option_value() -> None:
    args = ["-c", "/etc/x.cfg", "--firefly-dest=c:10514"]
    assert sitecfg.option_value(args, "-c") == "/etc/x.cfg"
    assert sitecfg.option_value(args, "--firefly-dest") == "c:10514"
    assert sitecfg.option_value(["-c"], "-c") is None


@given(st.lists(st.text(max_size=20), max_size=8))
@settings(max_examples=300, deadline=None)
def test_program_fuzz(argv: list[str]) -> None:
    prog, args = sitecfg.program(argv)
    assert isinstance(prog, str) and isinstance(args, list)
    sitecfg.option_value(args, "-c", "--scitag")


# ---- SciTags configuration ----------------------------------------------------------------------

XROOTD_CFG = """\
all.export /data
xrd.protocol XrdHttp:1094 libXrdHttp.so
# xrootd.pmark ffdest commented.example.org:10514
xrootd.pmark ffdest collector.scitags.org:10514,origin  # to both
xrootd.pmark domain any
xrootd.pmark defsfile curl \\
   https://scitags.org/api.json
xrootd.pmark map2exp path /data/ska ska
"""


def test_pmark_complete() -> None:
    p = sitecfg.parse_xrootd_pmark(XROOTD_CFG)
    assert p.ffdest == ["collector.scitags.org:10514", "origin"]
    assert p.fireflies_on and p.defsfile and p.maps and p.problems == []
    assert len(p.lines) == 4  # the comment is not a directive; the continuation joins


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("xrootd.pmark domain any\n", "firefly disabled; configuration incomplete (no ffdest)"),
        ("xrootd.pmark ffdest c:10514\nxrootd.pmark use nofirefly\n", "use nofirefly"),
        (
            "xrootd.pmark ffdest c:10514 map2exp default atlas\n",
            "map2exp/map2act without defsfile (XRootD refuses to start)",
        ),
    ],
)
def test_pmark_incomplete(text: str, problem: str) -> None:
    assert problem in sitecfg.parse_xrootd_pmark(text).problems


def test_pmark_absent_and_includes() -> None:
    assert sitecfg.parse_xrootd_pmark("all.export /\n#xrootd.pmark ffdest x\n").lines == []
    assert sitecfg.xrootd_includes("continue /etc/xrootd/config.d/\n# continue /x\n") == [
        "/etc/xrootd/config.d/"
    ]


def test_dcache_and_flowd() -> None:
    assert sitecfg.dcache_firefly("pool.enable.firefly = true\n") is True
    assert sitecfg.dcache_firefly("pool.enable.firefly=true\npool.enable.firefly=false") is False
    assert sitecfg.dcache_firefly("# pool.enable.firefly=true\n") is None
    conf = (
        "# flowd-go\nplugins:\n  firefly:\n    port: 10514\nbackends:\n  marker:\n"
        "    targetInterfaces: [eth0]\n  # prometheus:\n  firefly:\n    x: 1\nother: 2\n"
    )
    assert sitecfg.flowd_go_backends(conf) == ["marker", "firefly"]
    assert sitecfg.flowd_go_backends("# backends:\n#   marker:\n") == []
    assert sitecfg.flowd_cfg("PLUGIN='np_api'\nBACKEND = \"udp_firefly\"\n# X=1\n") == {
        "PLUGIN": "np_api",
        "BACKEND": "udp_firefly",
    }


def test_flow_export_configs() -> None:
    assert (
        sitecfg.softflowd_export('INTERFACE="eth0"\nOPTIONS="-n 192.0.2.9:2055"\n')
        == "eth0 -> 192.0.2.9:2055"
    )
    assert sitecfg.softflowd_export('INTERFACE=""\nOPTIONS=""\n') is None
    assert sitecfg.softflowd_export("interface=eth1\n") == "eth1"
    assert sitecfg.pmacct_export(
        "daemonize: true\nplugins: nfprobe[out], memory\nnfprobe_receiver: 192.0.2.9:2100\n"
    ) == ["nfprobe -> 192.0.2.9:2100"]
    assert sitecfg.pmacct_export("plugins: memory\n") == []


@given(st.text(max_size=800))
@settings(max_examples=300, deadline=None)
def test_config_parsers_fuzz(text: str) -> None:
    try:
        pm = sitecfg.parse_xrootd_pmark(text)
        pm.problems  # noqa: B018
        sitecfg.xrootd_includes(text)
        sitecfg.dcache_firefly(text)
        sitecfg.flowd_go_backends(text)
        sitecfg.flowd_cfg(text)
        sitecfg.softflowd_export(text)
        sitecfg.pmacct_export(text)
        sitecfg.uncommented(text)
    except DtnkitError:
        pytest.fail("a config parser raised on text it should just not recognise")
