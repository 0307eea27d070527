"""``dtnkit exporter --web.config.file``: the Prometheus exporter-toolkit web configuration
(the file node_exporter and every official exporter read), as far as the standard library goes.

Supported::

    tls_server_config:
      cert_file: /etc/dtnkit/exporter.pem
      key_file: /etc/dtnkit/exporter.key
      client_ca_file: /etc/dtnkit/clients-ca.pem      # optional
      client_auth_type: RequireAndVerifyClientCert    # or NoClientCert (the default)
    basic_auth_users:
      prometheus: $2y$10$...                          # bcrypt (htpasswd -nBC 10 "" | tr -d ':\\n')

Anything else the toolkit knows (cipher_suites, min_version, http_server_config, other
client_auth_type values, ...) is refused by name rather than ignored: a setting silently
dropped would weaken what the operator asked for.  bcrypt is checked with the C library's
crypt(3) (libxcrypt has it), through Python's ``crypt`` module; a good password is remembered
for the process's life (the exporter-toolkit caches too), so a scrape costs one bcrypt once.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.exposition import make_wsgi_app

from dtnkit.errors import BadInput
from dtnkit.monitor import httpd

TLS_KEYS = ("cert_file", "key_file", "client_ca_file", "client_auth_type")
CLIENT_AUTH = ("NoClientCert", "RequireAndVerifyClientCert")
BCRYPT = re.compile(r"^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$")
NEXT = "see docs/monitoring.md (Scrape configuration) for the keys dtnkit reads"


@dataclass(frozen=True)
class WebConfig:
    cert_file: Path | None = None
    key_file: Path | None = None
    client_ca_file: Path | None = None
    users: dict[str, str] = field(default_factory=dict)  # user -> bcrypt hash

    @property
    def tls(self) -> bool:
        return self.cert_file is not None


def load(path: Path) -> WebConfig:
    """Read and check a web config file; BadInput naming the key (never a hash)."""
    what = f"--web.config.file {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(
            what, f"cannot be read ({exc.__class__.__name__})", "pass a readable YAML file"
        ) from None
    try:  # optional: only a --web.config.file is YAML
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        raise BadInput(
            what,
            "reading YAML needs PyYAML, which is not installed",
            "pip install pyyaml (or apt-get install python3-yaml)",
        ) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise BadInput(what, f"is not valid YAML{where}", "fix the file") from None
    return parse(doc, what, base=path.parent)


def parse(doc: Any, what: str = "web config", base: Path = Path(".")) -> WebConfig:
    if doc is None:
        return WebConfig()
    if not isinstance(doc, dict):
        raise BadInput(what, "is not a mapping of settings", NEXT)
    unknown = sorted(str(k) for k in doc if k not in ("tls_server_config", "basic_auth_users"))
    if unknown:
        raise BadInput(what, f"{', '.join(unknown)}: not supported by dtnkit exporter", NEXT)
    tls = doc.get("tls_server_config") or {}
    if not isinstance(tls, dict):
        raise BadInput(what, "tls_server_config is not a mapping", NEXT)
    bad = sorted(str(k) for k in tls if k not in TLS_KEYS)
    if bad:
        raise BadInput(
            what,
            f"tls_server_config: {', '.join(bad)}: not supported by dtnkit "
            "exporter (Python's ssl defaults are used)",
            NEXT,
        )
    files = {
        k: _file(tls.get(k), f"{what}: tls_server_config.{k}", base)
        for k in ("cert_file", "key_file", "client_ca_file")
    }
    if (files["cert_file"] is None) != (files["key_file"] is None):
        raise BadInput(
            what,
            "tls_server_config needs both cert_file and key_file",
            "give both, or no tls_server_config for HTTP",
        )
    auth = tls.get(
        "client_auth_type",
        "RequireAndVerifyClientCert" if files["client_ca_file"] else "NoClientCert",
    )
    if auth not in CLIENT_AUTH:
        raise BadInput(
            what,
            f"tls_server_config.client_auth_type {str(auth)[:40]!r}: not "
            f"supported (dtnkit exporter has {' and '.join(CLIENT_AUTH)})",
            NEXT,
        )
    if (auth == "RequireAndVerifyClientCert") != (files["client_ca_file"] is not None):
        raise BadInput(
            what,
            "RequireAndVerifyClientCert and client_ca_file go together",
            "give both, or neither",
        )
    if files["client_ca_file"] is not None and files["cert_file"] is None:
        raise BadInput(what, "client_ca_file needs cert_file and key_file", "give all three")
    users = doc.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise BadInput(what, "basic_auth_users is not a mapping of user: bcrypt hash", NEXT)
    checked: dict[str, str] = {}
    for user, hashed in users.items():
        name = str(user)
        if not name or ":" in name or not name.isprintable():
            raise BadInput(
                what,
                f"basic_auth_users: user {name[:40]!r} cannot be sent in basic auth",
                "use a printable name without ':'",
            )
        if not isinstance(hashed, str) or not BCRYPT.match(hashed):
            raise BadInput(
                what,
                f"basic_auth_users: {name[:40]}'s password is not a bcrypt hash",
                "make one with htpasswd -nBC 10 USER (the part after ':')",
            )
        checked[name] = hashed
    return WebConfig(files["cert_file"], files["key_file"], files["client_ca_file"], checked)


def _file(value: Any, what: str, base: Path) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BadInput(what, "is not a file name", "give a path")
    path = base / value
    if not path.is_file():
        raise BadInput(what, f"{path} is not a file", "give an existing PEM file")
    return path


def _crypt(password: str, hashed: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # deprecated, gone in Python 3.13: only basic_auth_users need it
    try:
        return crypt.crypt(password, hashed) or ""
    except (OSError, ValueError):
        return ""


class BasicAuth:
    """WSGI middleware: 401 unless the request's basic-auth user and password match."""

    def __init__(self, app: Callable[..., Iterable[bytes]], users: dict[str, str]) -> None:
        self.app = app
        self.users = users
        self._good: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def allowed(self, header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, sep, password = (
                base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if not sep or hashed is None:
            return False
        with self._lock:
            if (user, password) in self._good:
                return True
        if hmac.compare_digest(_crypt(password, hashed).encode(), hashed.encode()):
            with self._lock:
                self._good.add((user, password))
            return True
        return False

    def __call__(self, environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        if self.allowed(environ.get("HTTP_AUTHORIZATION")):
            return self.app(environ, start)
        start(
            "401 Unauthorized",
            [("WWW-Authenticate", 'Basic realm="dtnkit exporter"'), ("Content-Type", "text/plain")],
        )
        return [b"Unauthorized\n"]


def serve(
    config: WebConfig, addr: str, port: int, registry: Any, settings: httpd.Settings | None = None
) -> httpd.ExporterServer:
    """Serve ``registry`` at ``/metrics`` with the config's TLS and basic auth; the server
    (:class:`dtnkit.monitor.httpd.ExporterServer`, with its connection *settings*)."""
    app: Callable[..., Iterable[bytes]] = make_wsgi_app(registry)
    if config.users:
        app = BasicAuth(app, config.users)
    ctx = None
    if config.tls:
        try:
            ctx = httpd.tls_context(
                str(config.cert_file),
                str(config.key_file),
                None if config.client_ca_file is None else str(config.client_ca_file),
            )
        except BadInput as exc:
            raise BadInput(
                "--web.config.file tls_server_config",
                f"cannot be used ({exc.why})",
                "check cert_file, key_file and client_ca_file",
            ) from None
    return httpd.ExporterServer(app, addr, port, ctx, settings)
