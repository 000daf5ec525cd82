from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.registration_refusal_out import RegistrationRefusalOut
    from ..models.validation_out import ValidationOut


T = TypeVar("T", bound="DatasetValidationOut")


@_attrs_define
class DatasetValidationOut:
    """A dry run of `POST /v1/datasets`: what registering the body would do, nothing created.

    Attributes:
        would_register (bool): Whether `POST /v1/datasets` with this body would register now (201).
        n_rows (int):
        n_features (int):
        validation (ValidationOut): The owner's validation report: how the service's reader sees the source. Shown to
            the
            dataset's owner and to admins only, never to analysts.
        refusal (None | RegistrationRefusalOut | Unset): Why it would be refused (422), when it would.
    """

    would_register: bool
    n_rows: int
    n_features: int
    validation: ValidationOut
    refusal: None | RegistrationRefusalOut | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.registration_refusal_out import RegistrationRefusalOut  # noqa: PLC0415

        would_register = self.would_register

        n_rows = self.n_rows

        n_features = self.n_features

        validation = self.validation.to_dict()

        refusal: dict[str, Any] | None | Unset
        if isinstance(self.refusal, Unset):
            refusal = UNSET
        elif isinstance(self.refusal, RegistrationRefusalOut):
            refusal = self.refusal.to_dict()
        else:
            refusal = self.refusal

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "would_register": would_register,
                "n_rows": n_rows,
                "n_features": n_features,
                "validation": validation,
            }
        )
        if refusal is not UNSET:
            field_dict["refusal"] = refusal

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.registration_refusal_out import RegistrationRefusalOut  # noqa: PLC0415
        from ..models.validation_out import ValidationOut  # noqa: PLC0415

        d = dict(src_dict)
        would_register = d.pop("would_register")

        n_rows = d.pop("n_rows")

        n_features = d.pop("n_features")

        validation = ValidationOut.from_dict(d.pop("validation"))

        def _parse_refusal(data: object) -> None | RegistrationRefusalOut | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                refusal_type_0 = RegistrationRefusalOut.from_dict(data)

                return refusal_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RegistrationRefusalOut | Unset, data)

        refusal = _parse_refusal(d.pop("refusal", UNSET))

        dataset_validation_out = cls(
            would_register=would_register,
            n_rows=n_rows,
            n_features=n_features,
            validation=validation,
            refusal=refusal,
        )

        dataset_validation_out.additional_properties = d
        return dataset_validation_out

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
