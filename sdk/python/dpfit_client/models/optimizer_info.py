from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.optimizer_info_params import OptimizerInfoParams


T = TypeVar("T", bound="OptimizerInfo")


@_attrs_define
class OptimizerInfo:
    """
    Attributes:
        name (str):
        summary (str):
        assumptions (str):
        guarantee (str):
        reference (str):
        params (OptimizerInfoParams): JSON schema of the optimizer's parameters.
    """

    name: str
    summary: str
    assumptions: str
    guarantee: str
    reference: str
    params: OptimizerInfoParams
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        summary = self.summary

        assumptions = self.assumptions

        guarantee = self.guarantee

        reference = self.reference

        params = self.params.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "summary": summary,
                "assumptions": assumptions,
                "guarantee": guarantee,
                "reference": reference,
                "params": params,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.optimizer_info_params import OptimizerInfoParams  # noqa: PLC0415

        d = dict(src_dict)
        name = d.pop("name")

        summary = d.pop("summary")

        assumptions = d.pop("assumptions")

        guarantee = d.pop("guarantee")

        reference = d.pop("reference")

        params = OptimizerInfoParams.from_dict(d.pop("params"))

        optimizer_info = cls(
            name=name,
            summary=summary,
            assumptions=assumptions,
            guarantee=guarantee,
            reference=reference,
            params=params,
        )

        optimizer_info.additional_properties = d
        return optimizer_info

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
