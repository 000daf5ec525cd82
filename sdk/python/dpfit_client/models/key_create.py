from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..models.key_create_role import KeyCreateRole

T = TypeVar("T", bound="KeyCreate")


@_attrs_define
class KeyCreate:
    """
    Attributes:
        name (str): The principal this key authenticates (used in dataset grants). A new name creates the principal; an
            existing name with the same role gets another key (rotation); an existing name with another role is refused
            (409).
        role (KeyCreateRole):
    """

    name: str
    role: KeyCreateRole

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        role = self.role.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "role": role,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        role = KeyCreateRole(d.pop("role"))

        key_create = cls(
            name=name,
            role=role,
        )

        return key_create
