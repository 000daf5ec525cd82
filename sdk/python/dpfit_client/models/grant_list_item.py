from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="GrantListItem")


@_attrs_define
class GrantListItem:
    """A grant as its dataset's owner sees it in `GET /v1/datasets/{id}/grants`.

    Attributes:
        dataset_id (str):
        principal (str):
        epsilon_cap (float | None):
        created_at (datetime.datetime):
        epsilon_spent (float): ε at δ_B of this principal's standing charges on the dataset (charges without a refund),
            composed as the budget composes them.
    """

    dataset_id: str
    principal: str
    epsilon_cap: float | None
    created_at: datetime.datetime
    epsilon_spent: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dataset_id = self.dataset_id

        principal = self.principal

        epsilon_cap: float | None
        epsilon_cap = self.epsilon_cap

        created_at = self.created_at.isoformat()

        epsilon_spent = self.epsilon_spent

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dataset_id": dataset_id,
                "principal": principal,
                "epsilon_cap": epsilon_cap,
                "created_at": created_at,
                "epsilon_spent": epsilon_spent,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        dataset_id = d.pop("dataset_id")

        principal = d.pop("principal")

        def _parse_epsilon_cap(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        epsilon_cap = _parse_epsilon_cap(d.pop("epsilon_cap"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        epsilon_spent = d.pop("epsilon_spent")

        grant_list_item = cls(
            dataset_id=dataset_id,
            principal=principal,
            epsilon_cap=epsilon_cap,
            created_at=created_at,
            epsilon_spent=epsilon_spent,
        )

        grant_list_item.additional_properties = d
        return grant_list_item

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
