from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.optimizer_choice_params import OptimizerChoiceParams


T = TypeVar("T", bound="OptimizerChoice")


@_attrs_define
class OptimizerChoice:
    """
    Attributes:
        name (str): An optimizer from GET /v1/optimizers.
        params (OptimizerChoiceParams | Unset): The optimizer's parameters (its `params` schema in GET /v1/optimizers):
            numbers, strings, booleans, and for private_selection and private_tuning a list of candidate objects; at most 8
            levels of arrays and objects deep.
    """

    name: str
    params: OptimizerChoiceParams | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        params: dict[str, Any] | Unset = UNSET
        if not isinstance(self.params, Unset):
            params = self.params.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )
        if params is not UNSET:
            field_dict["params"] = params

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.optimizer_choice_params import OptimizerChoiceParams  # noqa: PLC0415

        d = dict(src_dict)
        name = d.pop("name")

        _params = d.pop("params", UNSET)
        params: OptimizerChoiceParams | Unset
        if isinstance(_params, Unset):
            params = UNSET
        else:
            params = OptimizerChoiceParams.from_dict(_params)

        optimizer_choice = cls(
            name=name,
            params=params,
        )

        return optimizer_choice
