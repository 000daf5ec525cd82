from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.field_problem import FieldProblem


T = TypeVar("T", bound="Problem")


@_attrs_define
class Problem:
    """RFC 9457 problem details, with the field at fault.

    Attributes:
        title (str):
        status (int):
        detail (str):
        type_ (str | Unset):  Default: 'about:blank'.
        field (None | str | Unset):
        errors (list[FieldProblem] | None | Unset):
        epsilon_remaining (float | None | Unset): On 409: the dataset's remaining ε at δ_B.
        dataset_id (None | str | Unset): On 409 for a source that is already registered: the dataset it backs (given to
            that dataset's owner and to admins only).
    """

    title: str
    status: int
    detail: str
    type_: str | Unset = "about:blank"
    field: None | str | Unset = UNSET
    errors: list[FieldProblem] | None | Unset = UNSET
    epsilon_remaining: float | None | Unset = UNSET
    dataset_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        title = self.title

        status = self.status

        detail = self.detail

        type_ = self.type_

        field: None | str | Unset
        if isinstance(self.field, Unset):
            field = UNSET
        else:
            field = self.field

        errors: list[dict[str, Any]] | None | Unset
        if isinstance(self.errors, Unset):
            errors = UNSET
        elif isinstance(self.errors, list):
            errors = []
            for errors_type_0_item_data in self.errors:
                errors_type_0_item = errors_type_0_item_data.to_dict()
                errors.append(errors_type_0_item)

        else:
            errors = self.errors

        epsilon_remaining: float | None | Unset
        if isinstance(self.epsilon_remaining, Unset):
            epsilon_remaining = UNSET
        else:
            epsilon_remaining = self.epsilon_remaining

        dataset_id: None | str | Unset
        if isinstance(self.dataset_id, Unset):
            dataset_id = UNSET
        else:
            dataset_id = self.dataset_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "title": title,
                "status": status,
                "detail": detail,
            }
        )
        if type_ is not UNSET:
            field_dict["type"] = type_
        if field is not UNSET:
            field_dict["field"] = field
        if errors is not UNSET:
            field_dict["errors"] = errors
        if epsilon_remaining is not UNSET:
            field_dict["epsilon_remaining"] = epsilon_remaining
        if dataset_id is not UNSET:
            field_dict["dataset_id"] = dataset_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.field_problem import FieldProblem  # noqa: PLC0415

        d = dict(src_dict)
        title = d.pop("title")

        status = d.pop("status")

        detail = d.pop("detail")

        type_ = d.pop("type", UNSET)

        def _parse_field(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        field = _parse_field(d.pop("field", UNSET))

        def _parse_errors(data: object) -> list[FieldProblem] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                errors_type_0 = []
                _errors_type_0 = data
                for errors_type_0_item_data in _errors_type_0:
                    errors_type_0_item = FieldProblem.from_dict(errors_type_0_item_data)

                    errors_type_0.append(errors_type_0_item)

                return errors_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[FieldProblem] | None | Unset, data)

        errors = _parse_errors(d.pop("errors", UNSET))

        def _parse_epsilon_remaining(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        epsilon_remaining = _parse_epsilon_remaining(d.pop("epsilon_remaining", UNSET))

        def _parse_dataset_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        dataset_id = _parse_dataset_id(d.pop("dataset_id", UNSET))

        problem = cls(
            title=title,
            status=status,
            detail=detail,
            type_=type_,
            field=field,
            errors=errors,
            epsilon_remaining=epsilon_remaining,
            dataset_id=dataset_id,
        )

        problem.additional_properties = d
        return problem

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
