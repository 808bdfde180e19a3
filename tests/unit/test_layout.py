"""The floors and rooms import one way only, lazy imports inside functions included.

The layout is docs/design.md's "The code: three floors, and rooms in the top one", mapped file by
file in docs/code-layout.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What each package may import of ours; anything of ours not named here is forbidden.
ALLOWED = {
    "conf": {"conf"},
    "producers": {"producers", "conf"},
    "streaming": {"streaming", "conf"},
    "eosbench.console": {"eosbench.console", "conf"},
    "eosbench.local": {"eosbench.local", "eosbench.console", "conf", "producers", "streaming"},
    # A bench may run a soak (`bench recovery` times each engine's kill-driver rounds through it).
    "eosbench.bench": {"eosbench.bench", "eosbench.soak", "eosbench.local", "eosbench.console", "conf", "producers",
                       "streaming"},
    "eosbench.soak": {"eosbench.soak", "eosbench.local", "eosbench.console", "conf", "producers", "streaming"},
    "eosbench.pipeline": {"eosbench.pipeline", "eosbench.local", "eosbench.console", "conf", "producers",
                          "streaming"},
}
OURS = ("eosbench", "producers", "streaming", "conf")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in OURS}


def _package_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:2]) if parts[0] == "eosbench" and len(parts) > 2 else parts[0]


def test_imports_flow_one_way():
    wrong = []
    for folder in OURS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            package = _package_of(path)
            if package == "eosbench":
                continue  # eosbench/cli.py sits on top and assembles every room
            allowed = ALLOWED[package]
            wrong += [f"{path.relative_to(ROOT)} imports {name}" for name in sorted(_imports(path))
                      if not any(name == ok or name.startswith(ok + ".") for ok in allowed)]
    assert wrong == [], "\n".join(wrong)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Each module of ours and the modules of ours it imports, anywhere in it (functions, TYPE_CHECKING)."""
    paths = {_module_name(path): path for folder in OURS for path in sorted((ROOT / folder).rglob("*.py"))}

    def module_of(name: str) -> str | None:
        while name and name not in paths:  # `from a.b import c` names a module a.b.c, or c inside a.b
            name = name.rpartition(".")[0]
        return name or None

    return {module: {found for name in _imports(path) if (found := module_of(name)) not in (None, module)}
            for module, path in paths.items()}


def test_no_import_cycles():
    graph = _import_graph()
    done: set[str] = set()
    cycles = []

    def visit(module: str, trail: list[str]) -> None:
        for imported in sorted(graph[module]):
            if imported in trail:
                cycles.append(" -> ".join(trail[trail.index(imported):] + [imported]))
            elif imported not in done:
                visit(imported, trail + [imported])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert cycles == [], "modules that import each other, directly or round a circle:\n" + "\n".join(cycles)


# streaming/'s rooms, highest first: a room may import the rooms after it, never one before it.
STREAMING_ROOMS = ("realtime", "sink", "source", "verify")


def test_streaming_rooms_import_only_down():
    """The job at the top may use every room; a room uses the rooms below it and the top's shared modules; the
    shared modules (the group, the owner record, the task plan, processing, stats...) use no room."""
    graph = _import_graph()
    wrong = []
    for module, imported in sorted(graph.items()):
        parts = module.split(".")
        if parts[0] != "streaming" or module in ("streaming", "streaming.job"):
            continue
        own = parts[1] if parts[1] in STREAMING_ROOMS else None
        below = STREAMING_ROOMS[STREAMING_ROOMS.index(own):] if own else ()
        for name in sorted(imported):
            target = name.split(".")
            if target[0] != "streaming":
                continue
            if name == "streaming.job" or (target[1] in STREAMING_ROOMS and target[1] not in below):
                wrong.append(f"{module} imports {name}")
    assert wrong == [], "\n".join(wrong)


def test_every_package_says_what_it_is_for():
    for init in sorted([*(ROOT / "eosbench").rglob("__init__.py"), *(ROOT / "streaming").rglob("__init__.py")]):
        docstring = ast.get_docstring(ast.parse(init.read_text()))
        assert docstring and "\n" not in docstring.strip(), f"{init.relative_to(ROOT)} needs a one-line docstring"
