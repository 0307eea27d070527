"""The exporter keeps the habits of Prometheus exporters: --web.listen-address, the
exporter-toolkit --web.config.file (TLS, bcrypt basic auth), the standard process_* series,
runbook_url on every alert, no free text in alerting labels, and systemd units the runbook
names.  A real exporter process, scraped by curl and linted by promtool."""

from __future__ import annotations

import configparser
import contextlib
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import taken
from tests.support.polling import until
from tests.support.xrootd import Pki, make_pki

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.monitor import webconfig
from dtnkit.monitor.build import rules_text

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "contrib" / "systemd"
MONITORING = REPO / "docs" / "monitoring.md"
PROCESS = (
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_open_fds",
    "process_start_time_seconds",
    "process_max_fds",
    "process_virtual_memory_bytes",
)


def _bcrypt(password: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4))


@contextlib.contextmanager
def _exporter(tmp_path: Path, *args: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "exporter",
            "--no-drift",
            "--db",
            str(tmp_path / "none.sqlite"),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()  # printed once the socket listens
        assert line.startswith("dtnkit exporter: listening on "), line + proc.stderr.read()
        yield line.split()[-1]
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0


def _curl(url: str, *args: str) -> tuple[int, str]:
    res = subprocess.run(
        ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *args, url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    body, _, code = res.stdout.rpartition("\n")
    return int(code or 0), body


needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="needs promtool (Debian package prometheus)"
)


@needs_curl
@needs_promtool
def test_web_listen_address_and_standard_process_series(tmp_path: Path) -> None:
    """--web.listen-address is --listen; the scrape has process_* as node_exporter's has, and
    promtool check metrics finds nothing to say about the whole exposition."""
    with _exporter(tmp_path, "--web.listen-address", "127.0.0.1:0") as url:
        code, text = _curl(url)
    assert code == 200 and url.startswith("http://127.0.0.1:")
    names = {
        line.split("{")[0].split()[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert set(PROCESS) <= names
    lint = subprocess.run(
        ["promtool", "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl")
    return make_pki(tmp_path_factory.mktemp("pki"))


@needs_curl
def test_web_config_file_tls_and_basic_auth_scraped_by_curl(tmp_path: Path, pki: Pki) -> None:
    web = tmp_path / "web.yml"
    web.write_text(
        yaml.safe_dump(
            {
                "tls_server_config": {"cert_file": str(pki.cert), "key_file": str(pki.key)},
                "basic_auth_users": {"prometheus": _bcrypt("s3cret-pw")},
            }
        )
    )
    with _exporter(
        tmp_path, "--web.listen-address=127.0.0.1:0", "--web.config.file", str(web)
    ) as url:
        assert url.startswith("https://127.0.0.1:")
        ca = ("--cacert", str(pki.ca_file))
        good, text = _curl(url, *ca, "-u", "prometheus:s3cret-pw")
        again, _ = _curl(url, *ca, "-u", "prometheus:s3cret-pw")
        wrong, _ = _curl(url, *ca, "-u", "prometheus:guess")
        nobody, _ = _curl(url, *ca, "-u", "root:s3cret-pw")
        anonymous, _ = _curl(url, *ca)
        untrusted, _ = _curl(url, "-u", "prometheus:s3cret-pw")  # the system's CAs only
        plain, _ = _curl(url.replace("https:", "http:"), "-u", "prometheus:s3cret-pw")
    assert (good, again) == (200, 200) and "process_cpu_seconds_total" in text
    assert (wrong, nobody, anonymous) == (401, 401, 401)
    assert untrusted == 0 and plain != 200


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        (
            {"tls_server_config": {"cert_file": "c", "key_file": "k", "min_version": "TLS13"}},
            "min_version: not supported",
        ),
        ({"http_server_config": {"http2": False}}, "http_server_config: not supported"),
        ({"basic_auth_users": {"prometheus": "plain-password-here"}}, "is not a bcrypt hash"),
        (
            {"tls_server_config": {"client_auth_type": "VerifyClientCertIfGiven"}},
            "client_auth_type 'VerifyClientCertIfGiven': not supported",
        ),
        ({"basic_auth_users": ["prometheus"]}, "is not a mapping"),
        ("just text", "is not a mapping of settings"),
    ],
)
def test_web_config_refuses_what_it_does_not_support(
    tmp_path: Path, environment: Environment, doc: Any, why: str
) -> None:
    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump(doc))
    rc = main(
        [
            "exporter",
            "--no-drift",
            "--web.listen-address",
            "127.0.0.1:0",
            "--web.config.file",
            str(web),
        ],
        environment,
    )
    err = taken(environment.stderr)
    assert rc == 9, err
    assert err.startswith(f"dtnkit: error: --web.config.file {web}") and why in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and "plain-password" not in err
    assert taken(environment.stdout) == ""  # never listened


def test_web_config_not_yaml_and_with_cert_flags(
    tmp_path: Path, environment: Environment, pki: Pki
) -> None:
    web = tmp_path / "web.yml"
    web.write_text("tls_server_config: [unclosed\n")
    assert main(["exporter", "--web.config.file", str(web)], environment) == 9
    assert "is not valid YAML at line" in taken(environment.stderr)
    web.write_text("{}\n")
    assert (
        main(
            [
                "exporter",
                "--web.config.file",
                str(web),
                "--cert",
                str(pki.cert),
                "--key",
                str(pki.key),
            ],
            environment,
        )
        == 9
    )
    assert "pass either --web.config.file or --cert" in taken(environment.stderr)


_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30))
_doc = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "tls_server_config",
                    "basic_auth_users",
                    "cert_file",
                    "key_file",
                    "client_ca_file",
                    "client_auth_type",
                    "prometheus",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_doc)
def test_web_config_fuzz_gives_a_config_or_one_clear_error(doc: Any) -> None:
    try:
        webconfig.parse(doc, "web config", base=Path("/nonexistent-dkfh"))
    except BadInput as exc:
        text = exc.render()
        assert text.startswith("dtnkit: error: web config") and "Next:" in text


def _slugs(markdown: str) -> set[str]:
    """GitHub's anchors of the page's headings."""
    return {
        re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", markdown, re.M)
    }


def test_every_alert_has_a_runbook_url_to_its_section_and_no_free_text_label() -> None:
    doc = yaml.safe_load(rules_text())
    anchors = _slugs(MONITORING.read_text())
    alerts = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    assert alerts
    for rule in alerts:
        url = rule["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert page.endswith("/docs/monitoring.md"), url
        assert anchor == rule["alert"].lower() and anchor in anchors, url
        assert set(rule.get("labels", {})) == {"severity"}
        assert "reason" not in rule["expr"]


def _unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text())
    return parser


@pytest.mark.parametrize(
    "name,command", [("dtnkit-exporter.service", "exporter"), ("dtnkit-serve.service", "serve")]
)
def test_systemd_units_verify_and_the_runbook_names_them(
    tmp_path: Path, name: str, command: str
) -> None:
    """The units parse, name a real dtnkit command and options, pass systemd-analyze verify
    (the installed path rewritten to this venv's dtnkit), and docs/monitoring.md's runbook
    names them."""
    unit = _unit(UNITS / name)
    argv = shlex.split(unit["Service"]["ExecStart"])
    assert argv[0] == "/usr/local/bin/dtnkit" and argv[1] == command
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    helptext = subprocess.run(
        [sys.executable, "-m", "dtnkit", command, "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for env in unit["Service"].get("Environment", "").split("\n"):
        for opt in re.findall(r"(--[a-z.-]+)", env):
            assert opt in helptext, opt
    assert f"contrib/systemd/{name}" in MONITORING.read_text()
    assert f"systemctl status {name.removesuffix('.service')}" in MONITORING.read_text()
    if shutil.which("systemd-analyze") is None:
        pytest.skip("no systemd-analyze here: the parse above is the check")
    dtnkit = Path(sys.executable).with_name("dtnkit")
    local = tmp_path / name
    local.write_text((UNITS / name).read_text().replace("/usr/local/bin/dtnkit", str(dtnkit)))
    res = subprocess.run(
        ["systemd-analyze", "verify", str(local)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0 and name not in res.stderr, res.stderr
    broken = tmp_path / "broken" / name
    broken.parent.mkdir()
    broken.write_text(local.read_text().replace(str(dtnkit), "/nonexistent-dkfh/dtnkit"))
    bad = subprocess.run(
        ["systemd-analyze", "verify", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode != 0  # the check above can fail


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs prometheus")
def test_prometheus_scrapes_through_web_config_tls_and_basic_auth(tmp_path: Path, pki: Pki) -> None:
    """A real Prometheus with `scheme: https`, `tls_config` and `basic_auth` scrapes the
    exporter (process_* arrive); the same target with a wrong password is down with 401."""
    import json
    import socket
    import urllib.parse
    import urllib.request

    web = tmp_path / "web.yml"
    web.write_text(
        yaml.safe_dump(
            {
                "tls_server_config": {"cert_file": str(pki.cert), "key_file": str(pki.key)},
                "basic_auth_users": {"prometheus": _bcrypt("s3cret-pw")},
            }
        )
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with _exporter(
        tmp_path, "--web.listen-address=127.0.0.1:0", "--web.config.file", str(web)
    ) as url:
        target = urllib.parse.urlsplit(url).netloc
        jobs = [
            {
                "job_name": job,
                "scheme": "https",
                "scrape_interval": "1s",
                "tls_config": {"ca_file": str(pki.ca_file)},
                "basic_auth": {"username": "prometheus", "password": password},
                "static_configs": [{"targets": [target]}],
            }
            for job, password in (("dtnkit", "s3cret-pw"), ("wrong", "guess"))
        ]
        config = tmp_path / "prometheus.yml"
        config.write_text(
            yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": jobs})
        )
        with open(tmp_path / "prometheus.log", "w") as log:
            prom = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        base = f"http://127.0.0.1:{port}"

        def targets() -> dict[str, dict[str, Any]] | None:
            with urllib.request.urlopen(base + "/api/v1/targets", timeout=5) as resp:
                doc = json.loads(resp.read())
            found = {t["labels"]["job"]: t for t in doc["data"]["activeTargets"]}
            done = all(t["health"] != "unknown" for t in found.values())
            return found if len(found) == 2 and done else None

        try:
            found = until("both targets scraped", targets, 60)
            q = urllib.parse.urlencode({"query": 'process_cpu_seconds_total{job="dtnkit"}'})
            result = until(
                "process_cpu_seconds_total stored",
                lambda: json.loads(
                    urllib.request.urlopen(f"{base}/api/v1/query?{q}", timeout=5).read()
                )["data"]["result"],
                30,
            )
        finally:
            prom.terminate()
            prom.wait(timeout=30)
    assert found["dtnkit"]["health"] == "up", found["dtnkit"]
    assert found["wrong"]["health"] == "down" and "401" in found["wrong"]["lastError"]
    assert result and float(result[0]["value"][1]) > 0
