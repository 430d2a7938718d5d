"""YAML for configs that a hostile file cannot blow up: aliases are counted, never expanded, before anything is
built, and duplicate keys are errors (docs/reliability.md)."""

from __future__ import annotations

import typing
from typing import Any

import yaml

from ner_app.errors import NerAppError
from ner_app.limits import MAX_CONFIG_NODES


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (the later one silently won)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r:.40}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes of ``node`` with every alias expanded (memoised: an alias bomb is counted, never built)."""
    if id(node) not in memo:
        memo[id(node)] = 1  # a cycle counts once
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        memo[id(node)] = 1 + sum(min(expanded_size(c, memo), 1 << 40) for c in children)
    return memo[id(node)]


def load_bounded_yaml(
    text: str,
    source: str,
    loader: type[BoundedLoader] = BoundedLoader,
    error: type[NerAppError] = NerAppError,
) -> Any:
    """Parse YAML, refusing documents that expand (through aliases) beyond ``MAX_CONFIG_NODES`` nodes."""
    parser = loader(text)
    try:
        node = parser.get_single_node()
        if node is None:
            return None
        size = expanded_size(node, {})
        if size > MAX_CONFIG_NODES:
            raise error(
                f"{source}: the YAML expands to {size} values (aliases included), more than {MAX_CONFIG_NODES}"
            )
        return parser.construct_document(node)
    finally:
        parser.dispose()
