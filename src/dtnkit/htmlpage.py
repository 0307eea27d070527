"""What every dtnkit HTML report shares (``dtnkit sweep report``, ``dtnkit fleet
report``): figures drawn with matplotlib (Agg, imported only when a report is drawn), one
self-contained page with the figures embedded as ``data:`` URIs, escaping, and writing the
files safely.

Writing is safe in a directory others can write to: every file is made in a fresh private
directory inside DIR and then renamed over its name in DIR, so a symlink planted in DIR is
replaced, never followed; a DIR that is not a directory is refused before anything is drawn.
Every value shown goes through :func:`escape`, and the page's Content-Security-Policy
(:data:`CSP`) allows no script and no fetch.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dtnkit.errors import BadInput, ToolMissing

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: the page's name in DIR
PAGE = "report.html"
#: the hint for an installed package (from PyPI or a wheel)
INSTALL_HINT = "pip install 'dtnkit[report]' (matplotlib 3.6 or later)"


def install_hint(package_dir: Path | None = None) -> str:
    """How to get matplotlib for the dtnkit at ``package_dir`` (default: this one): a
    checkout (``src/dtnkit`` next to ``dev/bootstrap.sh``, installed editable) is told its
    own bootstrap or its venv's pip; an installed package the extra from the index."""
    here = Path(__file__).resolve().parent if package_dir is None else package_dir
    root = here.parent.parent
    if (
        here.parent.name == "src"
        and (root / "dev" / "bootstrap.sh").is_file()
        and (root / "pyproject.toml").is_file()
    ):
        return (
            f"in the checkout {root}: run ./dev/bootstrap.sh (or "
            ".venv/bin/pip install -e '.[report]')"
        )
    return INSTALL_HINT


CSS = """
body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;font-size:.9em}
th{background:#f3f3f3} pre{background:#f7f7f7;padding:.5em;overflow-x:auto}
figure{margin:1em 0} figure img{max-width:100%;height:auto;border:1px solid #eee}
.none{color:#777} .note{background:#fff6e0;padding:.5em}
"""
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


@dataclasses.dataclass(frozen=True)
class Drawn:
    """One drawn figure: its file stem, title, how to read it, and its PNG and SVG bytes."""

    stem: str
    title: str
    reading: str
    png: bytes
    svg: bytes
    #: the figure's panel titles and each legend's entries, read from the drawn figure
    panels: tuple[str, ...] = ()
    legends: tuple[tuple[str, ...], ...] = ()


# ---------------------------------------------------------------- writing safely


def check_dir(out: Path) -> None:
    """Refuse an output that exists and is not a directory (before anything is drawn)."""
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise BadInput(
            f"cannot use {out} for the report", exc.strerror or str(exc), "give another -o DIR"
        ) from None
    if stat.S_ISLNK(st.st_mode):
        raise BadInput(
            f"{out} is a symbolic link",
            "the report is written only into a real directory",
            "give the directory itself as -o",
        )
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput(
            f"{out} is not a directory",
            "-o names the directory the report is written into",
            "give a new or an existing directory",
        )


def write_files(out: Path, files: Mapping[str, bytes]) -> tuple[str, ...]:
    """Write ``files`` (plain names) into ``out``: made in a private temporary directory
    inside it, then each renamed into place (a symlink at a name is replaced, not followed).
    ``report.html`` goes last."""
    check_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True, mode=0o755)
        check_dir(out)  # a symlink raced in by now is refused
        tmp = Path(tempfile.mkdtemp(prefix=".dtnkit-report-", dir=out))
    except OSError as exc:
        raise BadInput(
            f"cannot write the report into {out}",
            exc.strerror or str(exc),
            "give a directory you can write to",
        ) from None
    order = sorted(files, key=lambda n: (n == PAGE, n))
    try:
        for name in order:
            if "/" in name or name.startswith("."):
                raise ValueError(f"bad report file name {name!r}")
            fd = os.open(tmp / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(files[name])
        for name in order:
            os.rename(tmp / name, out / name)
    except OSError as exc:
        raise BadInput(
            f"cannot write the report into {out}",
            exc.strerror or str(exc),
            "check the directory (a name in it may be a directory)",
        ) from None
    finally:
        for left in tmp.iterdir() if tmp.exists() else ():
            left.unlink()
        if tmp.exists():
            tmp.rmdir()
    return tuple(order)


# ---------------------------------------------------------------- figures


def pyplot(command: str = "dtnkit sweep report") -> Any:
    """matplotlib.pyplot with the Agg backend, or ToolMissing naming ``command``."""
    try:  # optional (the [report] extra), needed only when a report is drawn
        import matplotlib
    except ImportError:
        raise ToolMissing(
            f"{command} needs matplotlib", "it is not installed", install_hint()
        ) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # after use(): pyplot picks its backend when imported

    return plt


def save(fig: Figure, stem: str, title: str, reading: str, *, svg: bool = True) -> Drawn:
    """The figure as PNG and SVG bytes (reproducible: no dates, no software name), closed.
    ``svg=False``: PNG only (a page alone embeds only the PNG); ``Drawn.svg`` is empty."""
    import matplotlib.pyplot as plt  # optional: loaded by pyplot(), which drew the figure

    panels = tuple(t for ax in fig.axes if (t := ax.get_title()))
    legends = tuple(
        tuple(t.get_text() for t in leg.get_texts())
        for leg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
        if leg is not None
    )
    png, vector = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=100, metadata={"Software": None})
    if svg:
        fig.savefig(vector, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return Drawn(
        stem=stem,
        title=title,
        reading=reading,
        png=png.getvalue(),
        svg=vector.getvalue(),
        panels=panels,
        legends=legends,
    )


def nothing(ax: Axes, why: str) -> None:
    """An empty plot saying why it is empty."""
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def mpl_text(text: str) -> str:
    """Text for matplotlib as written (a ``$`` would start mathtext)."""
    return text.replace("$", r"\$")


# ---------------------------------------------------------------- the page


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], empty: str) -> str:
    """An HTML table of escaped cells, or ``empty`` as a paragraph when there are no rows."""
    if not rows:
        return f"<p class='none'>{escape(empty)}</p>"
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure_html(f: Drawn, *, files: bool = True) -> str:
    """A figure embedded as a PNG ``data:`` URI, with its title, how to read it, and the
    names of its files (when it has them: ``files``)."""
    uri = "data:image/png;base64," + base64.b64encode(f.png).decode("ascii")
    widest = max((len(entries) for entries in f.legends), default=0)
    alt = "; ".join([f.title, *f.panels])
    return (
        f"<figure id='fig-{escape(f.stem)}' data-legend-entries='{widest}'>"
        f"<h3>{escape(f.title)}</h3>"
        f"<img class='figure' src='{uri}' alt='{escape(alt)}' width='800'>"
        f"<figcaption><p>{escape(f.reading)}</p>"
        + (
            "<p class='panels'>Panels: "
            + "; ".join(f"<q>{escape(t)}</q>" for t in f.panels)
            + ".</p>"
            if len(f.panels) > 1
            else ""
        )
        + (
            f"<p>Files: <code>{escape(f.stem)}.png</code>, <code>{escape(f.stem)}.svg</code>.</p>"
            if files
            else ""
        )
        + "</figcaption></figure>"
    )
