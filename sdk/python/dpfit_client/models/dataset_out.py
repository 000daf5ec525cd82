from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.dataset_out_execution import DatasetOutExecution
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.categorical_feature import CategoricalFeature
    from ..models.dataset_source_out import DatasetSourceOut
    from ..models.label_spec import LabelSpec
    from ..models.numeric_feature import NumericFeature
    from ..models.privacy_out import PrivacyOut
    from ..models.validation_out import ValidationOut


T = TypeVar("T", bound="DatasetOut")


@_attrs_define
class DatasetOut:
    """
    Attributes:
        id (str):
        name (str):
        owner (str):
        n_rows (int):
        n_features (int):
        label (LabelSpec): The label column: binary (which value is positive, which negative) or numeric.

            Binary labels map to ±1; rows whose label is not ``positive`` count as negative. Numeric
            labels (for regression models) are read as numbers, missing/non-numeric values as 0, and
            clipped to the model's declared public ``label_bound`` when a job reads them.
        features (list[CategoricalFeature | NumericFeature]):
        budget (PrivacyOut): An (ε, δ) as stored: responses carry no request bounds, so rows admitted under older,
            looser rules are still shown.
        created_at (datetime.datetime):
        fingerprint (None | str | Unset): Shown to the owner only.
        source (DatasetSourceOut | None | Unset): Shown to the owner only.
        validation (None | Unset | ValidationOut): The validation report of the registration. Shown to the owner and
            admins only (null for others, and for datasets registered before reports existed).
        execution (DatasetOutExecution | Unset): Where jobs compute: `workers` (the service reads the rows) or
            `in_database` (the rows never leave the owner's PostgreSQL database). Default: DatasetOutExecution.WORKERS.
        retired_at (datetime.datetime | None | Unset): Set when an admin retired the dataset: no job is admitted.
        duplicates (list[str] | None | Unset): Admins only (null for everyone else): the ids of other datasets — of
            other owners — holding the same content (the whole source's or a member file's). Registration compares content
            only within one owner's datasets, so that it tells no owner anything about another's data; admins decide about
            such budgets (e.g. retire one).
    """

    id: str
    name: str
    owner: str
    n_rows: int
    n_features: int
    label: LabelSpec
    features: list[CategoricalFeature | NumericFeature]
    budget: PrivacyOut
    created_at: datetime.datetime
    fingerprint: None | str | Unset = UNSET
    source: DatasetSourceOut | None | Unset = UNSET
    validation: None | Unset | ValidationOut = UNSET
    execution: DatasetOutExecution | Unset = DatasetOutExecution.WORKERS
    retired_at: datetime.datetime | None | Unset = UNSET
    duplicates: list[str] | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.dataset_source_out import DatasetSourceOut  # noqa: PLC0415
        from ..models.numeric_feature import NumericFeature  # noqa: PLC0415
        from ..models.validation_out import ValidationOut  # noqa: PLC0415

        id = self.id

        name = self.name

        owner = self.owner

        n_rows = self.n_rows

        n_features = self.n_features

        label = self.label.to_dict()

        features = []
        for features_item_data in self.features:
            features_item: dict[str, Any]
            if isinstance(features_item_data, NumericFeature):
                features_item = features_item_data.to_dict()
            else:
                features_item = features_item_data.to_dict()

            features.append(features_item)

        budget = self.budget.to_dict()

        created_at = self.created_at.isoformat()

        fingerprint: None | str | Unset
        if isinstance(self.fingerprint, Unset):
            fingerprint = UNSET
        else:
            fingerprint = self.fingerprint

        source: dict[str, Any] | None | Unset
        if isinstance(self.source, Unset):
            source = UNSET
        elif isinstance(self.source, DatasetSourceOut):
            source = self.source.to_dict()
        else:
            source = self.source

        validation: dict[str, Any] | None | Unset
        if isinstance(self.validation, Unset):
            validation = UNSET
        elif isinstance(self.validation, ValidationOut):
            validation = self.validation.to_dict()
        else:
            validation = self.validation

        execution: str | Unset = UNSET
        if not isinstance(self.execution, Unset):
            execution = self.execution.value

        retired_at: None | str | Unset
        if isinstance(self.retired_at, Unset):
            retired_at = UNSET
        elif isinstance(self.retired_at, datetime.datetime):
            retired_at = self.retired_at.isoformat()
        else:
            retired_at = self.retired_at

        duplicates: list[str] | None | Unset
        if isinstance(self.duplicates, Unset):
            duplicates = UNSET
        elif isinstance(self.duplicates, list):
            duplicates = self.duplicates

        else:
            duplicates = self.duplicates

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "owner": owner,
                "n_rows": n_rows,
                "n_features": n_features,
                "label": label,
                "features": features,
                "budget": budget,
                "created_at": created_at,
            }
        )
        if fingerprint is not UNSET:
            field_dict["fingerprint"] = fingerprint
        if source is not UNSET:
            field_dict["source"] = source
        if validation is not UNSET:
            field_dict["validation"] = validation
        if execution is not UNSET:
            field_dict["execution"] = execution
        if retired_at is not UNSET:
            field_dict["retired_at"] = retired_at
        if duplicates is not UNSET:
            field_dict["duplicates"] = duplicates

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.categorical_feature import CategoricalFeature  # noqa: PLC0415
        from ..models.dataset_source_out import DatasetSourceOut  # noqa: PLC0415
        from ..models.label_spec import LabelSpec  # noqa: PLC0415
        from ..models.numeric_feature import NumericFeature  # noqa: PLC0415
        from ..models.privacy_out import PrivacyOut  # noqa: PLC0415
        from ..models.validation_out import ValidationOut  # noqa: PLC0415

        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        owner = d.pop("owner")

        n_rows = d.pop("n_rows")

        n_features = d.pop("n_features")

        label = LabelSpec.from_dict(d.pop("label"))

        features = []
        _features = d.pop("features")
        for features_item_data in _features:

            def _parse_features_item(data: object) -> CategoricalFeature | NumericFeature:
                try:
                    if not isinstance(data, dict):
                        raise TypeError()
                    features_item_type_0 = NumericFeature.from_dict(data)

                    return features_item_type_0
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
                if not isinstance(data, dict):
                    raise TypeError()
                features_item_type_1 = CategoricalFeature.from_dict(data)

                return features_item_type_1

            features_item = _parse_features_item(features_item_data)

            features.append(features_item)

        budget = PrivacyOut.from_dict(d.pop("budget"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_fingerprint(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        fingerprint = _parse_fingerprint(d.pop("fingerprint", UNSET))

        def _parse_source(data: object) -> DatasetSourceOut | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                source_type_0 = DatasetSourceOut.from_dict(data)

                return source_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DatasetSourceOut | None | Unset, data)

        source = _parse_source(d.pop("source", UNSET))

        def _parse_validation(data: object) -> None | Unset | ValidationOut:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                validation_type_0 = ValidationOut.from_dict(data)

                return validation_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | ValidationOut, data)

        validation = _parse_validation(d.pop("validation", UNSET))

        _execution = d.pop("execution", UNSET)
        execution: DatasetOutExecution | Unset
        if isinstance(_execution, Unset):
            execution = UNSET
        else:
            execution = DatasetOutExecution(_execution)

        def _parse_retired_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                retired_at_type_0 = datetime.datetime.fromisoformat(data)

                return retired_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        retired_at = _parse_retired_at(d.pop("retired_at", UNSET))

        def _parse_duplicates(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                duplicates_type_0 = cast(list[str], data)

                return duplicates_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        duplicates = _parse_duplicates(d.pop("duplicates", UNSET))

        dataset_out = cls(
            id=id,
            name=name,
            owner=owner,
            n_rows=n_rows,
            n_features=n_features,
            label=label,
            features=features,
            budget=budget,
            created_at=created_at,
            fingerprint=fingerprint,
            source=source,
            validation=validation,
            execution=execution,
            retired_at=retired_at,
            duplicates=duplicates,
        )

        dataset_out.additional_properties = d
        return dataset_out

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
