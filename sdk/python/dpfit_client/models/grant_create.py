from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="GrantCreate")


@_attrs_define
class GrantCreate:
    """
    Attributes:
        principal (str):
    """

    principal: str

    def to_dict(self) -> dict[str, Any]:
        principal = self.principal

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "principal": principal,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        principal = d.pop("principal")

        grant_create = cls(
            principal=principal,
        )

        return grant_create
