from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="BudgetOut")


@_attrs_define
class BudgetOut:
    """
    Attributes:
        dataset_id (str):
        epsilon (float): Total ε_B.
        delta (float): Total δ_B.
        epsilon_spent (float): ε at δ_B of the standing charges' composition (exact Gaussian DP when all are Gaussian-
            family, else Rényi; basic composition if δ_B = 0).
        epsilon_remaining (float):
        jobs_charged (int): Jobs whose charge stands (charges minus refunds).
        accounting (str): How the budget composes.
        your_epsilon_cap (float | None | Unset): The cap of the caller's grant, if any.
        your_epsilon_spent (float | Unset): ε (at δ_B) spent by the caller's own jobs on this dataset. Default: 0.0.
    """

    dataset_id: str
    epsilon: float
    delta: float
    epsilon_spent: float
    epsilon_remaining: float
    jobs_charged: int
    accounting: str
    your_epsilon_cap: float | None | Unset = UNSET
    your_epsilon_spent: float | Unset = 0.0
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dataset_id = self.dataset_id

        epsilon = self.epsilon

        delta = self.delta

        epsilon_spent = self.epsilon_spent

        epsilon_remaining = self.epsilon_remaining

        jobs_charged = self.jobs_charged

        accounting = self.accounting

        your_epsilon_cap: float | None | Unset
        if isinstance(self.your_epsilon_cap, Unset):
            your_epsilon_cap = UNSET
        else:
            your_epsilon_cap = self.your_epsilon_cap

        your_epsilon_spent = self.your_epsilon_spent

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dataset_id": dataset_id,
                "epsilon": epsilon,
                "delta": delta,
                "epsilon_spent": epsilon_spent,
                "epsilon_remaining": epsilon_remaining,
                "jobs_charged": jobs_charged,
                "accounting": accounting,
            }
        )
        if your_epsilon_cap is not UNSET:
            field_dict["your_epsilon_cap"] = your_epsilon_cap
        if your_epsilon_spent is not UNSET:
            field_dict["your_epsilon_spent"] = your_epsilon_spent

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        dataset_id = d.pop("dataset_id")

        epsilon = d.pop("epsilon")

        delta = d.pop("delta")

        epsilon_spent = d.pop("epsilon_spent")

        epsilon_remaining = d.pop("epsilon_remaining")

        jobs_charged = d.pop("jobs_charged")

        accounting = d.pop("accounting")

        def _parse_your_epsilon_cap(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        your_epsilon_cap = _parse_your_epsilon_cap(d.pop("your_epsilon_cap", UNSET))

        your_epsilon_spent = d.pop("your_epsilon_spent", UNSET)

        budget_out = cls(
            dataset_id=dataset_id,
            epsilon=epsilon,
            delta=delta,
            epsilon_spent=epsilon_spent,
            epsilon_remaining=epsilon_remaining,
            jobs_charged=jobs_charged,
            accounting=accounting,
            your_epsilon_cap=your_epsilon_cap,
            your_epsilon_spent=your_epsilon_spent,
        )

        budget_out.additional_properties = d
        return budget_out

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
