"""Headless Chromium (the Debian package) on a report page: the page as written, and a copy
with a probe script that says where every figure is and whether it decoded.  Shared by the
sweep report's and the fleet report's tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

PROBE = """<script>
window.addEventListener('load', function () {
  var out = [];
  document.querySelectorAll('img.figure').forEach(function (img) {
    var r = img.getBoundingClientRect();
    out.push([img.complete ? 1 : 0, img.naturalWidth, img.naturalHeight, Math.round(r.left),
              Math.round(r.top + window.scrollY), Math.round(r.width),
              Math.round(r.height)].join(','));
  });
  var d = document.createElement('pre'); d.id = 'swr-probe';
  d.textContent = 'FIGS[' + out.join(';') + ']';
  document.body.appendChild(d);
});
</script>"""
WIDTH, HEIGHT = 1000, 3600


def chromium(
    tmp_path: Path, page: Path, *args: str, width: int = WIDTH, height: int = HEIGHT
) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on page in its own process group (killed whole on timeout),
    with a private profile."""
    argv = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={width},{height}",
        "--virtual-time-budget=5000",
        *args,
        page.as_uri(),
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def console_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The page's console messages (a blocked script, a refused resource, a parse error would
    each log one)."""
    return [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


def with_probe(page: Path, dest: Path) -> Path:
    """A copy of page whose policy also allows the inline probe script, and the probe."""
    text = page.read_text().replace(
        "style-src 'unsafe-inline'", "style-src 'unsafe-inline'; script-src 'unsafe-inline'"
    )
    dest.write_text(text.replace("</body>", PROBE + "</body>"))
    return dest


def probed_figures(proc: subprocess.CompletedProcess[str]) -> list[list[int]] | None:
    """From ``--dump-dom`` of a :func:`with_probe` page: per figure [complete, natural width,
    natural height, left, top, width, height], or None when the probe did not run."""
    found = re.search(r"FIGS\[([^\]]*)\]</pre>", proc.stdout)
    if not found:
        return None
    return [[int(v) for v in f.split(",")] for f in found.group(1).split(";") if f]
