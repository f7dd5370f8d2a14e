"""The policy modules share one kit (authz/policies/_kit.py): a constant or helper is defined once, not copied."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import authz.policies
from authz.policies import _kit

PACKAGE = Path(authz.policies.__file__).parent
# Every area module has these two by contract (its policies and its table rows).
PER_MODULE = frozenset({"POLICIES", "TABLE"})


def _module_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


def _modules() -> dict[str, set[str]]:
    return {path.stem: _module_level_names(path) for path in sorted(PACKAGE.glob("*.py"))}


def test_no_constant_is_defined_in_two_policy_modules() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for module, names in _modules().items():
        for name in names - PER_MODULE:
            if name.isupper():
                where[name].append(module)
    assert {name: modules for name, modules in where.items() if len(modules) > 1} == {}


def test_no_policy_module_redefines_what_the_kit_offers() -> None:
    offered = {name.lstrip("_") for name in vars(_kit) if not name.startswith("__")} - {"annotations"}
    copies = {module: sorted(n for n in names if n.lstrip("_") in offered)
              for module, names in _modules().items() if module != "_kit"}
    assert {module: names for module, names in copies.items() if names} == {}
