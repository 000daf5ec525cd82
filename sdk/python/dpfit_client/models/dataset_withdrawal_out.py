from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.privacy_out import PrivacyOut


T = TypeVar("T", bound="DatasetWithdrawalOut")


@_attrs_define
class DatasetWithdrawalOut:
    """A dataset withdrawn by its owner or an admin before anything was charged on it: the
    dataset is gone (its claims released: the source may be registered again); this record
    stays for admins.

        Attributes:
            dataset_id (str):
            name (str):
            owner (str):
            source_uri (str):
            n_rows (int):
            budget (PrivacyOut): An (ε, δ) as stored: responses carry no request bounds, so rows admitted under older,
                looser rules are still shown.
            registered_at (datetime.datetime):
            withdrawn_by (str):
            withdrawn_at (datetime.datetime):
    """

    dataset_id: str
    name: str
    owner: str
    source_uri: str
    n_rows: int
    budget: PrivacyOut
    registered_at: datetime.datetime
    withdrawn_by: str
    withdrawn_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dataset_id = self.dataset_id

        name = self.name

        owner = self.owner

        source_uri = self.source_uri

        n_rows = self.n_rows

        budget = self.budget.to_dict()

        registered_at = self.registered_at.isoformat()

        withdrawn_by = self.withdrawn_by

        withdrawn_at = self.withdrawn_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dataset_id": dataset_id,
                "name": name,
                "owner": owner,
                "source_uri": source_uri,
                "n_rows": n_rows,
                "budget": budget,
                "registered_at": registered_at,
                "withdrawn_by": withdrawn_by,
                "withdrawn_at": withdrawn_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.privacy_out import PrivacyOut  # noqa: PLC0415

        d = dict(src_dict)
        dataset_id = d.pop("dataset_id")

        name = d.pop("name")

        owner = d.pop("owner")

        source_uri = d.pop("source_uri")

        n_rows = d.pop("n_rows")

        budget = PrivacyOut.from_dict(d.pop("budget"))

        registered_at = datetime.datetime.fromisoformat(d.pop("registered_at"))

        withdrawn_by = d.pop("withdrawn_by")

        withdrawn_at = datetime.datetime.fromisoformat(d.pop("withdrawn_at"))

        dataset_withdrawal_out = cls(
            dataset_id=dataset_id,
            name=name,
            owner=owner,
            source_uri=source_uri,
            n_rows=n_rows,
            budget=budget,
            registered_at=registered_at,
            withdrawn_by=withdrawn_by,
            withdrawn_at=withdrawn_at,
        )

        dataset_withdrawal_out.additional_properties = d
        return dataset_withdrawal_out

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
