"""No two classes or type aliases in src/ share a name.

A reader who meets ``Limits`` or ``Decision`` in a signature should not have to look up which
module's it is: each module-level class and each capitalised type alias (``Buffer = bytes |
...``) has a name of its own in the whole package.  The same alias written out twice is one
definition imported where needed.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _type_like(name: str) -> bool:
    """A capitalised, not all-capitals name: a class or a type alias (``Buffer``), not a
    constant (``MAX_SESSIONS``)."""
    return name[:1].isupper() and not name.isupper()


def _type_names(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name) and _type_like(t.id)]
    return names


def shared_names(root: Path) -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for name in _type_names(ast.parse(path.read_text(), str(path))):
            where[name].append(str(path.relative_to(root)))
    return {name: files for name, files in where.items() if len(files) > 1}


def test_every_class_and_type_alias_has_its_own_name() -> None:
    shared = shared_names(SRC / "dtnkit")
    assert not shared, "names defined in more than one module:\n" + "\n".join(
        f"  {name}: {', '.join(files)}" for name, files in sorted(shared.items())
    )


def test_the_check_sees_a_shared_name(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class Limits:\n    pass\n")
    (tmp_path / "b.py").write_text("Limits = tuple[int, int]\n")
    (tmp_path / "c.py").write_text("LIMIT = 3\nclass Other:\n    pass\n")
    assert shared_names(tmp_path) == {"Limits": ["a.py", "b.py"]}
