"""No import circles among the project's modules.

Builds the import graph of protocol/, auth/, authz/, gateway/ and pipeline/ with ``ast`` (TYPE_CHECKING
imports included) and fails on any cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "auth", "authz", "gateway", "pipeline")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module name imported anywhere in the file: function bodies and `if TYPE_CHECKING:` blocks too.

    A TYPE_CHECKING import makes no circle at run time, but it is still a dependency a reader
    must follow: two modules that need each other's types are one concept split in two.
    """
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base]) if base else ".".join(package)
            names.add(base)
            # `from pkg import mod` imports the submodule pkg.mod.
            names.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = _project_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = _imported_names(ast.parse(path.read_text()), name, path.name == "__init__.py")
        graph[name] = {target for target in imported if target in modules and target != name}
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is a few hundred modules deep at most)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def test_the_graph_sees_imports() -> None:
    graph = import_graph()
    assert "protocol" in graph["gateway.session.request_stage"] or any(
        target.startswith("protocol") for target in graph["gateway.session.request_stage"]
    )


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert [c for c in strongly_connected(graph) if len(c) > 1] == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    cycles = [c for c in strongly_connected(import_graph()) if len(c) > 1]
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


MAX_MODULES_PER_FOLDER = 15  # beyond this a folder no longer shows its concerns: group it in subfolders


def test_no_folder_holds_more_than_fifteen_modules() -> None:
    crowded = {}
    for pkg in (*PACKAGES, "tests", "bench"):
        for folder in [ROOT / pkg, *(p for p in (ROOT / pkg).rglob("*") if p.is_dir())]:
            modules = [p for p in folder.glob("*.py") if p.name not in {"__init__.py", "__main__.py", "conftest.py"}]
            if len(modules) > MAX_MODULES_PER_FOLDER:
                crowded[str(folder.relative_to(ROOT))] = len(modules)
    assert crowded == {}


def test_the_pipeline_reads_the_acl_model_not_the_gateway() -> None:
    """pipeline/ works on audit logs and ACL files offline: it needs authz/ (the ACL model and its
    JSON format), never the gateway's modules."""
    reached = {f"{source} -> {target}" for source, targets in import_graph().items() if source.startswith("pipeline")
               for target in targets if target.startswith("gateway")}
    assert not reached, "pipeline imports the gateway: " + ", ".join(sorted(reached))


def test_the_session_takes_the_kip_368_timing_from_auth_not_from_the_upstream_login() -> None:
    """The re-authentication timing is one rule for both sides (auth/sasl/reauthentication.py): a session
    schedules its link's logins with it without reaching into the upstream's login module."""
    graph = import_graph()
    reached = {source for source, targets in graph.items()
               if source.startswith("gateway.session") and "gateway.upstream.login" in targets}
    assert not reached, "gateway.session imports gateway.upstream.login: " + ", ".join(sorted(reached))
    users = {source for source, targets in graph.items() if "auth.sasl.reauthentication" in targets}
    assert {"gateway.session.session", "gateway.upstream.client", "auth.sasl.server"} <= users
