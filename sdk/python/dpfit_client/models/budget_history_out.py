from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.budget_history_point import BudgetHistoryPoint


T = TypeVar("T", bound="BudgetHistoryOut")


@_attrs_define
class BudgetHistoryOut:
    """
    Attributes:
        dataset_id (str):
        epsilon (float): Total ε_B.
        delta (float): Total δ_B.
        points (list[BudgetHistoryPoint]): Oldest first, one per ledger row.
    """

    dataset_id: str
    epsilon: float
    delta: float
    points: list[BudgetHistoryPoint]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dataset_id = self.dataset_id

        epsilon = self.epsilon

        delta = self.delta

        points = []
        for points_item_data in self.points:
            points_item = points_item_data.to_dict()
            points.append(points_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dataset_id": dataset_id,
                "epsilon": epsilon,
                "delta": delta,
                "points": points,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.budget_history_point import BudgetHistoryPoint  # noqa: PLC0415

        d = dict(src_dict)
        dataset_id = d.pop("dataset_id")

        epsilon = d.pop("epsilon")

        delta = d.pop("delta")

        points = []
        _points = d.pop("points")
        for points_item_data in _points:
            points_item = BudgetHistoryPoint.from_dict(points_item_data)

            points.append(points_item)

        budget_history_out = cls(
            dataset_id=dataset_id,
            epsilon=epsilon,
            delta=delta,
            points=points,
        )

        budget_history_out.additional_properties = d
        return budget_history_out

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
