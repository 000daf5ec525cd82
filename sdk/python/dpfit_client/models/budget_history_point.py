from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.budget_history_point_kind import BudgetHistoryPointKind

T = TypeVar("T", bound="BudgetHistoryPoint")


@_attrs_define
class BudgetHistoryPoint:
    """
    Attributes:
        at (datetime.datetime): When the charge or refund was written.
        kind (BudgetHistoryPointKind):
        job_id (None | str): Null for other analysts' jobs (not yours to see).
        epsilon_spent (float): The dataset's ε spent at δ_B after this row.
        your_epsilon_spent (float): ε at δ_B of your own standing charges.
    """

    at: datetime.datetime
    kind: BudgetHistoryPointKind
    job_id: None | str
    epsilon_spent: float
    your_epsilon_spent: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        kind = self.kind.value

        job_id: None | str
        job_id = self.job_id

        epsilon_spent = self.epsilon_spent

        your_epsilon_spent = self.your_epsilon_spent

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "kind": kind,
                "job_id": job_id,
                "epsilon_spent": epsilon_spent,
                "your_epsilon_spent": your_epsilon_spent,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        kind = BudgetHistoryPointKind(d.pop("kind"))

        def _parse_job_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        job_id = _parse_job_id(d.pop("job_id"))

        epsilon_spent = d.pop("epsilon_spent")

        your_epsilon_spent = d.pop("your_epsilon_spent")

        budget_history_point = cls(
            at=at,
            kind=kind,
            job_id=job_id,
            epsilon_spent=epsilon_spent,
            your_epsilon_spent=your_epsilon_spent,
        )

        budget_history_point.additional_properties = d
        return budget_history_point

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
