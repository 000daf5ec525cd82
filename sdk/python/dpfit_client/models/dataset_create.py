from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.dataset_create_execution import DatasetCreateExecution
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.categorical_feature import CategoricalFeature
    from ..models.dataset_source import DatasetSource
    from ..models.label_spec import LabelSpec
    from ..models.numeric_feature import NumericFeature
    from ..models.privacy_budget import PrivacyBudget


T = TypeVar("T", bound="DatasetCreate")


@_attrs_define
class DatasetCreate:
    """
    Attributes:
        name (str):
        source (DatasetSource):
        label (LabelSpec): The label column: binary (which value is positive, which negative) or numeric.

            Binary labels map to ±1; rows whose label is not ``positive`` count as negative. Numeric
            labels (for regression models) are read as numbers, missing/non-numeric values as 0, and
            clipped to the model's declared public ``label_bound`` when a job reads them.
        features (list[CategoricalFeature | NumericFeature]):
        budget (PrivacyBudget):
        execution (DatasetCreateExecution | Unset): Where jobs on this dataset compute. `workers` (the default): the
            service's workers read the rows. `in_database` (PostgreSQL tables only): the rows never leave the owner's
            database — each job encodes them there (the public encoding compiled to SQL) and only d-sized aggregates and
            iterates leave it; the noise is added by the worker. A governance choice of the owner that analysts cannot
            override; jobs are then limited to logistic regression (binary or one-vs-rest) and multinomial logistic
            regression with the full-gradient optimizers, and bolt_on_psgd on logistic regression. Default:
            DatasetCreateExecution.WORKERS.
        strict (bool | None | Unset): How the validation report decides. Omitted (the default): refuse the source (422
            naming the label field) when most labels are wrong — more than half of the non-empty label cells outside the
            declared values (for a numeric label: not numbers). true: refuse on any label outside the declared values and
            any non-empty cell that is not a number in a numeric feature or label. false: refuse nothing; the counts are in
            `validation`.
    """

    name: str
    source: DatasetSource
    label: LabelSpec
    features: list[CategoricalFeature | NumericFeature]
    budget: PrivacyBudget
    execution: DatasetCreateExecution | Unset = DatasetCreateExecution.WORKERS
    strict: bool | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.numeric_feature import NumericFeature  # noqa: PLC0415

        name = self.name

        source = self.source.to_dict()

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

        execution: str | Unset = UNSET
        if not isinstance(self.execution, Unset):
            execution = self.execution.value

        strict: bool | None | Unset
        if isinstance(self.strict, Unset):
            strict = UNSET
        else:
            strict = self.strict

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "source": source,
                "label": label,
                "features": features,
                "budget": budget,
            }
        )
        if execution is not UNSET:
            field_dict["execution"] = execution
        if strict is not UNSET:
            field_dict["strict"] = strict

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.categorical_feature import CategoricalFeature  # noqa: PLC0415
        from ..models.dataset_source import DatasetSource  # noqa: PLC0415
        from ..models.label_spec import LabelSpec  # noqa: PLC0415
        from ..models.numeric_feature import NumericFeature  # noqa: PLC0415
        from ..models.privacy_budget import PrivacyBudget  # noqa: PLC0415

        d = dict(src_dict)
        name = d.pop("name")

        source = DatasetSource.from_dict(d.pop("source"))

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

        budget = PrivacyBudget.from_dict(d.pop("budget"))

        _execution = d.pop("execution", UNSET)
        execution: DatasetCreateExecution | Unset
        if isinstance(_execution, Unset):
            execution = UNSET
        else:
            execution = DatasetCreateExecution(_execution)

        def _parse_strict(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        strict = _parse_strict(d.pop("strict", UNSET))

        dataset_create = cls(
            name=name,
            source=source,
            label=label,
            features=features,
            budget=budget,
            execution=execution,
            strict=strict,
        )

        return dataset_create
