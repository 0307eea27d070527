"""The SciTags registry on this host: the snapshot shipped with dtnkit, the copy ``dtnkit
scitags refresh`` keeps in the state directory, or a file or URL given for one run; and the
tag a copy is asked for (``--scitag N`` or ``--experiment NAME --activity NAME``).

Which registry is read: ``--scitags-registry FILE|URL`` when given; else
``STATE_DIR/scitags-api.json`` when ``dtnkit scitags refresh`` wrote one; else the snapshot
in the package (``dtnkit/transfer/data/scitags-api.json``, its date and source inside).
"""

from __future__ import annotations

from pathlib import Path

from dtnkit.atomicfile import replace_file
from dtnkit.errors import BadInput
from dtnkit.transfer.wire.scitags import MAX_REGISTRY, Registry, parse_registry, parse_tag

#: Where the registry is published (howto.md of scitags.github.io; XRootD's defsfile example).
DEFAULT_URL = "https://www.scitags.org/api.json"
#: Its copy in the state directory (``dtnkit scitags refresh``).
STATE_NAME = "scitags-api.json"
SNAPSHOT = "shipped snapshot"
FETCH_TIMEOUT = 20.0


def snapshot_bytes() -> bytes:
    from importlib import resources  # a copy without a tag reads no registry

    return resources.files("dtnkit.transfer").joinpath("data/scitags-api.json").read_bytes()


def fetch(source: str) -> bytes:
    """The bytes of *source*: an http(s) URL (at most MAX_REGISTRY bytes, 20 s) or a file;
    BadInput when it cannot be read."""
    what = f"SciTags registry {source[:200]}"
    if source.startswith(("http://", "https://")):
        # here, not at the top: every `dtnkit cp` imports this module, and urllib.request
        # (with tempfile) was 2.5 % of its start-up (489 -> 477 M instructions)
        import urllib.error
        import urllib.request

        try:
            request = urllib.request.Request(source, headers={"User-Agent": "dtnkit"})
            with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as answer:
                data: bytes = answer.read(MAX_REGISTRY + 1)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise BadInput(
                what,
                f"cannot be fetched ({str(exc)[:200]})",
                "check the URL, or download it and pass the file",
            ) from None
        return data
    try:
        with open(source, "rb") as f:
            return f.read(MAX_REGISTRY + 1)
    except OSError as exc:
        raise BadInput(
            what,
            f"cannot be read ({exc.strerror or exc})",
            "pass a registry file (api.json) or an http(s) URL",
        ) from None


def parse(data: bytes, source: str) -> Registry:
    try:
        return parse_registry(data, source)
    except ValueError as exc:
        raise BadInput(
            f"SciTags registry {source[:200]}",
            f"is not valid ({exc})",
            f"pass the JSON published at {DEFAULT_URL}",
        ) from None


def load(source: str | None = None, state_dir: Path | None = None) -> Registry:
    """The registry from *source* (file or URL), else the state directory's copy, else the
    shipped snapshot."""
    if source is not None:
        return parse(fetch(source), source)
    if state_dir is not None:
        kept = state_dir / STATE_NAME
        if kept.is_file():
            return parse(fetch(str(kept)), str(kept))
    return parse(snapshot_bytes(), SNAPSHOT)


def refresh(source: str, state_dir: Path) -> Registry:
    """Fetch and check the registry at *source*, then keep it in *state_dir* (written to a
    temporary name and renamed: a reader sees the old or the new file, never half)."""
    data = fetch(source)
    registry = parse(data, source)
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        replace_file(state_dir / STATE_NAME, data)
    except OSError as exc:
        raise BadInput(
            f"state directory {state_dir}",
            f"cannot be written ({exc.strerror or exc})",
            "run as a user who may write it, or set DTNKIT_STATE_DIR",
        ) from None
    return registry


def choose_tag(
    scitag: str | None, experiment: str | None, activity: str | None, registry: Registry | None
) -> int | None:
    """The tag asked for by ``--scitag`` or ``--experiment``/``--activity`` (None: none);
    BadInput for a bad value or a name the registry does not have."""
    if scitag is not None and (experiment is not None or activity is not None):
        raise BadInput(
            "--scitag",
            "is given with --experiment/--activity",
            "pass either --scitag N or --experiment NAME --activity NAME",
        )
    if scitag is not None:
        try:
            return parse_tag(scitag)
        except ValueError as exc:
            raise BadInput(
                f"--scitag {scitag[:40]}",
                str(exc),
                "pass expId << 6 | actId (e.g. 143 for atlas Production Input), "
                "or --experiment NAME --activity NAME",
            ) from None
    if experiment is None and activity is None:
        return None
    if experiment is None:
        raise BadInput("--activity", "needs --experiment", "pass --experiment NAME too")
    assert registry is not None
    try:
        return registry.resolve(experiment, activity or "default")
    except KeyError as exc:
        raise BadInput(
            "--experiment/--activity",
            str(exc.args[0]),
            "run `dtnkit scitags list`, or `dtnkit scitags refresh` for the current registry",
        ) from None
