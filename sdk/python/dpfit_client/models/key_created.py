from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.key_created_role import KeyCreatedRole

T = TypeVar("T", bound="KeyCreated")


@_attrs_define
class KeyCreated:
    """
    Attributes:
        id (str):
        name (str):
        role (KeyCreatedRole):
        key (str): The API key. Shown once; only its hash is stored.
        created_at (datetime.datetime):
    """

    id: str
    name: str
    role: KeyCreatedRole
    key: str
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        name = self.name

        role = self.role.value

        key = self.key

        created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "role": role,
                "key": key,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        role = KeyCreatedRole(d.pop("role"))

        key = d.pop("key")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        key_created = cls(
            id=id,
            name=name,
            role=role,
            key=key,
            created_at=created_at,
        )

        key_created.additional_properties = d
        return key_created

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
