"""Hypothesis strategies for kio's message dataclasses, with the sizes bounded.

``st.from_type`` would build them too, but with unbounded tuples and strings, which makes a
sweep over every API and version take minutes; here tuples hold at most three items (one
below the second nesting level) and text and bytes stay short, as in spec_strategies.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any

from hypothesis import strategies as st


@cache
def kio_entities(cls: type, depth: int = 0) -> st.SearchStrategy[Any]:
    """Random instances of one kio dataclass (a message body or one of its structs)."""
    hints = typing.get_type_hints(cls)
    kwargs = {f.name: _of(hints[f.name], depth) for f in dataclasses.fields(cls) if f.init}
    return st.builds(cls, **kwargs)


def _of(hint: Any, depth: int) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = [_of(arg, depth) for arg in typing.get_args(hint) if arg is not type(None)]
        return st.one_of(st.none(), *options)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return st.lists(_of(item, depth + 1), max_size=3 if depth < 2 else 1).map(tuple)
    if dataclasses.is_dataclass(hint):
        return kio_entities(hint, depth)
    if isinstance(hint, type) and issubclass(hint, str):
        return st.text(max_size=12)
    if isinstance(hint, type) and issubclass(hint, bytes):
        return st.binary(max_size=40)
    return st.from_type(hint)
