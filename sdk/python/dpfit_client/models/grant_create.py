from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="GrantCreate")


@_attrs_define
class GrantCreate:
    """
    Attributes:
        principal (str):
        epsilon_cap (float | None | Unset): Optional cap on what this principal's jobs may spend (ε at δ_B): a finite
            number from 1e-06 up to the dataset's own ε_B (a larger cap would cap nothing and is refused; omit it for no
            cap). Granting again updates it.
    """

    principal: str
    epsilon_cap: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        principal = self.principal

        epsilon_cap: float | None | Unset
        if isinstance(self.epsilon_cap, Unset):
            epsilon_cap = UNSET
        else:
            epsilon_cap = self.epsilon_cap

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "principal": principal,
            }
        )
        if epsilon_cap is not UNSET:
            field_dict["epsilon_cap"] = epsilon_cap

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        principal = d.pop("principal")

        def _parse_epsilon_cap(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        epsilon_cap = _parse_epsilon_cap(d.pop("epsilon_cap", UNSET))

        grant_create = cls(
            principal=principal,
            epsilon_cap=epsilon_cap,
        )

        return grant_create
