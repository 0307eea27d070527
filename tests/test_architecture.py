"""The import rules of docs/architecture.md that import-linter does not check.

import-linter (run by dev/test.sh) checks the layers and that no modules import each other in a
cycle.  This checks the third rule: no module uses another module's private (``_name``) names,
whether imported by name (``from dtnkit.x import _y``) or reached through a module
(``from dtnkit import x``; ``x._y``).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((SRC / "dtnkit").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(modules: dict[str, Path]) -> list[str]:
    problems: list[str] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        aliases: dict[str, str] = {}  # local name -> dtnkit module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules and alias.asname:
                        aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(module, path, node)
                if not source.startswith("dtnkit"):
                    continue
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    if full in modules:
                        aliases[alias.asname or alias.name] = full
                    elif _private(alias.name) and source != module:
                        problems.append(f"{module} imports {source}.{alias.name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _private(node.attr)
                and aliases[node.value.id] != module
            ):
                problems.append(
                    f"{module} uses {aliases[node.value.id]}.{node.attr} (line {node.lineno})"
                )
    return sorted(set(problems))


def test_the_checker_sees_a_private_import(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("from dtnkit.b import _hidden\nfrom dtnkit import c\nc._secret()\n")
    b, c = tmp_path / "b.py", tmp_path / "c.py"
    b.write_text("_hidden = 1\n")
    c.write_text("def _secret() -> None: ...\n")
    found = private_uses({"dtnkit.a": a, "dtnkit.b": b, "dtnkit.c": c})
    assert found == ["dtnkit.a imports dtnkit.b._hidden", "dtnkit.a uses dtnkit.c._secret (line 3)"]


def test_no_module_uses_another_modules_private_names() -> None:
    modules = _modules()
    assert "dtnkit.transfer.server.adapter" in modules  # it reads the real tree
    assert private_uses(modules) == []


def _classes(modules: dict[str, Path]) -> list[tuple[str, ast.ClassDef]]:
    found = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        found += [(module, node) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    return found


def test_one_tool_protocol_and_one_run_record() -> None:
    """One measurement stack: the Tool protocol and the ToolRun record every tool returns
    are measure's, whoever runs the tool (a probe, diagnose, an experiment, a sweep)."""
    classes = _classes(_modules())
    assert [m for m, c in classes if c.name == "Tool"] == ["dtnkit.measure.tool"]
    assert [m for m, c in classes if c.name == "ToolRun"] == ["dtnkit.measure.tool"]


def test_no_tool_outside_measure_tools() -> None:
    """A class that runs something and says what it serves, whether it can run or how its
    output parses is a tool: it lives in measure/tools and is registered there."""
    tool_words = {"can_run", "servers", "parse"}
    found = []
    for module, c in _classes(_modules()):
        methods = {n.name for n in c.body if isinstance(n, ast.FunctionDef)}
        if (
            "run" in methods
            and methods & tool_words
            and module != "dtnkit.measure.tool"
            and not module.startswith("dtnkit.measure.tools.")
        ):
            found.append(f"{module}.{c.name}")
    assert found == []


#: what runs the string after a ``-c`` as a program
_INTERPRETERS = {"sh", "bash", "/bin/sh", "python", "python3"}
_PYTHON_FLAGS = {"-I", "-S", "-E", "-s", "-B", "-u", "-O", "-OO"}


def _stringy(node: ast.expr, texts: set[str]) -> bool:
    """A literal string, an f-string, a sum of them, or a name bound to one in the module."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _stringy(node.left, texts) and _stringy(node.right, texts)
    return isinstance(node, ast.Name) and node.id in texts


def _interpreter(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in _INTERPRETERS or node.value in _PYTHON_FLAGS
    if isinstance(node, ast.Attribute):  # sys.executable
        return node.attr == "executable"
    return isinstance(node, ast.Name)  # a Python or shell found at run time


def code_in_strings(modules: dict[str, Path]) -> list[str]:
    """Argument lists that hand a program written in a string to an interpreter
    (``sh -c '...'``, ``python -c '...'``): such code belongs in a module run with ``-m``."""
    found = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        texts = {
            t.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and _stringy(node.value, set())
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.List | ast.Tuple):
                continue
            elts = node.elts
            for i in range(1, len(elts) - 1):
                flag = elts[i]
                if (
                    isinstance(flag, ast.Constant)
                    and flag.value == "-c"
                    and _interpreter(elts[i - 1])
                    and _stringy(elts[i + 1], texts)
                ):
                    found.append(f"{module} line {node.lineno}")
    return found


def test_the_checker_sees_code_in_a_string(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text(
        "import sys\nS = 'echo $$'\nx = ['sh', '-c', S, 'f']\n"
        "y = [sys.executable, '-I', '-c', f'print({1})']\n"
        "z = ['iperf3', '-c', 'host']\nw = ['sh', '-c', user_line]\n"
    )
    assert code_in_strings({"dtnkit.a": a}) == ["dtnkit.a line 3", "dtnkit.a line 4"]


def test_no_code_in_strings() -> None:
    """A program run in a child (a namespace's helper, a port picker, a cgroup's entry) is a
    module or a file run by path, not a string after ``-c``."""
    assert code_in_strings(_modules()) == []
