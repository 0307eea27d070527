"""The access log's line: the Combined Log Format of Apache httpd and nginx.

    %h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"
    192.0.2.7 - - [01/Dec/2026:10:00:00 +0100] "GET /data/f HTTP/1.1" 200 1048576 "-" "dtnkit/0.1"

so the tools sites already point at their web servers' logs (goaccess, awstats, a
fail2ban filter, a Loki or Elasticsearch parser) read it as it is.  Pure: values in, one line
out, no I/O (``adapter`` writes it).

What it never holds: the bearer token (``%u`` is ``-``: dtnkit's tokens have no user name),
a query string (it may carry a token, as ``?authz=`` does for XRootD) in the request or the
Referer, the user part of a Referer URL.  Everything a client sent is escaped as Apache
escapes it (``\\"``, ``\\\\``, ``\\xhh`` for control and non-ASCII bytes), so a line is one
line and its quoted fields end where they seem to.
"""

from __future__ import annotations

import re
import time

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: a URL's scheme and authority, to drop a ``user:password@`` from a Referer
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")


def escape(text: str) -> str:
    """``text`` as Apache writes a request's values into its log: ``"`` and ``\\`` behind a
    backslash, printable ASCII as it is, every other byte (of its UTF-8) as ``\\xhh``."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif " " <= c <= "~":
            out.append(c)
        else:
            out.extend(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogatepass"))
    return "".join(out)


def without_query(target: str) -> str:
    """A request target or a URL without its query and fragment (which may hold secrets)."""
    return target.split("?", 1)[0].split("#", 1)[0]


def referer(value: str | None) -> str:
    """The Referer as logged: ``-`` when absent, else without query, fragment and user."""
    if not value:
        return "-"
    return _USERINFO.sub(r"\1", without_query(value)) or "-"


def clf_time(epoch: float) -> str:
    """``[01/Dec/2026:10:00:00 +0100]``: local time with its UTC offset, English month."""
    t = time.localtime(epoch)
    offset = t.tm_gmtoff or 0
    sign = "-" if offset < 0 else "+"
    hours, minutes = divmod(abs(offset) // 60, 60)
    return (
        f"[{t.tm_mday:02d}/{_MONTHS[t.tm_mon - 1]}/{t.tm_year:04d}:{t.tm_hour:02d}:"
        f"{t.tm_min:02d}:{t.tm_sec:02d} {sign}{hours:02d}{minutes:02d}]"
    )


def line(
    *,
    host: str,
    epoch: float,
    method: str | None,
    target: str | None,
    version: tuple[int, int] | None,
    status: int,
    sent: int,
    referer_value: str | None,
    agent: str | None,
) -> str:
    """One Combined Log Format line (no newline).  ``method`` None: the request line was not
    understood (``"-"``, as nginx logs a request it could not read)."""
    if method and target is not None and version is not None:
        request = escape(f"{method} {without_query(target)} HTTP/{version[0]}.{version[1]}")
    else:
        request = "-"
    return (
        f'{escape(host) or "-"} - - {clf_time(epoch)} "{request}" {status} '
        f'{sent if sent > 0 else "-"} "{escape(referer(referer_value))}" '
        f'"{escape(agent) if agent else "-"}"'
    )
