"""The role dtn.dtnkit.install: dtnkit into a venv from a wheel the controller copies,
idempotent, and an old dtnkit refused.  The wheel is dtnkit's own source zipped by the test
(no build backend, no network; pip is given --no-deps --no-index)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from tests.ansible.namespace_hosts import BIN, REPO, ansible_env, missing_ansible

import dtnkit

_WHY = missing_ansible()
pytestmark = [pytest.mark.needs_ansible, pytest.mark.skipif(bool(_WHY), reason=str(_WHY))]


def make_wheel(where: Path, version: str) -> Path:
    """A py3-none-any wheel of src/dtnkit, its RECORD with each file's hash."""
    wheel = where / f"dtnkit-{version}-py3-none-any.whl"
    info = f"dtnkit-{version}.dist-info"
    files: dict[str, bytes] = {}
    src = REPO / "src"
    for path in sorted((src / "dtnkit").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[str(path.relative_to(src))] = path.read_bytes()
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: dtnkit\nVersion: {version}\n".encode()
    )
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: ans-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/entry_points.txt"] = b"[console_scripts]\ndtnkit = dtnkit.cli.main:entry\n"
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return wheel


def install(tmp_path: Path, venv: Path, wheel: Path) -> subprocess.CompletedProcess[str]:
    play = tmp_path / "install.yml"
    play.write_text(
        json.dumps(
            [
                {
                    "name": "Install dtnkit",
                    "hosts": "localhost",
                    "gather_facts": False,
                    "vars": {
                        "dtnkit_venv": str(venv),
                        "dtnkit_wheel": str(wheel),
                        "install_pip_args": "--no-deps --no-index",
                    },
                    "roles": ["dtn.dtnkit.install"],
                }
            ]
        )
    )
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-c", "local", "-i", "localhost,", str(play)],
        capture_output=True,
        text=True,
        timeout=300,
        env=ansible_env(),
        cwd=tmp_path,
    )


def test_install_from_a_wheel_is_idempotent_and_an_old_one_is_refused(tmp_path: Path) -> None:
    venv = tmp_path / "venv with space"
    wheel = make_wheel(tmp_path, dtnkit.__version__)
    first = install(tmp_path, venv, wheel)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    assert "changed=0" not in first.stdout
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import dtnkit; print(dtnkit.__file__, dtnkit.__version__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.rsplit(maxsplit=1)
    assert where == [
        str(venv / "lib" / "python3.11" / "site-packages" / "dtnkit" / "__init__.py"),
        dtnkit.__version__,
    ]
    assert (venv / "bin" / "dtnkit").exists()
    again = install(tmp_path, venv, wheel)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-3000:]
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    old = install(tmp_path, venv, make_wheel(old_dir, "0.0.1"))  # a downgrade, refused after
    assert old.returncode != 0
    assert "dtnkit 0.0.1 in" in old.stdout and "is older than the collection" in old.stdout, (
        old.stdout[-3000:]
    )
