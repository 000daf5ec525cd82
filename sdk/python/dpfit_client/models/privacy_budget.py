from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="PrivacyBudget")


@_attrs_define
class PrivacyBudget:
    """
    Attributes:
        epsilon (float): Total ε_B of the dataset.
        delta (float): Total δ_B. 0 makes the dataset pure ε-DP (basic composition); otherwise at least 1e-100.
    """

    epsilon: float
    delta: float

    def to_dict(self) -> dict[str, Any]:
        epsilon = self.epsilon

        delta = self.delta

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "epsilon": epsilon,
                "delta": delta,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        epsilon = d.pop("epsilon")

        delta = d.pop("delta")

        privacy_budget = cls(
            epsilon=epsilon,
            delta=delta,
        )

        return privacy_budget
