"""``ModuleList`` with the type of its items known to the type checker (torch's says only ``Module``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar, cast

from torch import nn

M = TypeVar("M", bound=nn.Module)


class Layers(nn.ModuleList, Generic[M]):
    """An ``nn.ModuleList`` of one kind of module: the same parameters and state-dict keys, typed items."""

    def __init__(self, modules: Iterable[M]) -> None:
        super().__init__(modules)

    def __iter__(self) -> Iterator[M]:
        return cast(Iterator[M], super().__iter__())

    def at(self, index: int) -> M:
        """Item ``index`` (``self[index]`` is typed as any module)."""
        return cast(M, self[index])
