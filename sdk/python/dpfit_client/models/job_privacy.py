from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="JobPrivacy")


@_attrs_define
class JobPrivacy:
    """
    Attributes:
        epsilon (float):
        delta (float): 0 asks for pure ε-DP; otherwise at least 1e-100.
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

        job_privacy = cls(
            epsilon=epsilon,
            delta=delta,
        )

        return job_privacy
