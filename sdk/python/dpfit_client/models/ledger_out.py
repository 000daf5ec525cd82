from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.charge_out import ChargeOut


T = TypeVar("T", bound="LedgerOut")


@_attrs_define
class LedgerOut:
    """
    Attributes:
        dataset_id (str):
        orders (list[float]):
        charges (list[ChargeOut]):
        cached_rdp (list[float | None]): The dataset's cached total.
        recomputed_rdp (list[float | None]): The total recomputed from the rows.
        cached_pure_epsilon (float):
        recomputed_pure_epsilon (float):
        consistent (bool):
    """

    dataset_id: str
    orders: list[float]
    charges: list[ChargeOut]
    cached_rdp: list[float | None]
    recomputed_rdp: list[float | None]
    cached_pure_epsilon: float
    recomputed_pure_epsilon: float
    consistent: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dataset_id = self.dataset_id

        orders = self.orders

        charges = []
        for charges_item_data in self.charges:
            charges_item = charges_item_data.to_dict()
            charges.append(charges_item)

        cached_rdp = []
        for cached_rdp_item_data in self.cached_rdp:
            cached_rdp_item: float | None
            cached_rdp_item = cached_rdp_item_data
            cached_rdp.append(cached_rdp_item)

        recomputed_rdp = []
        for recomputed_rdp_item_data in self.recomputed_rdp:
            recomputed_rdp_item: float | None
            recomputed_rdp_item = recomputed_rdp_item_data
            recomputed_rdp.append(recomputed_rdp_item)

        cached_pure_epsilon = self.cached_pure_epsilon

        recomputed_pure_epsilon = self.recomputed_pure_epsilon

        consistent = self.consistent

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dataset_id": dataset_id,
                "orders": orders,
                "charges": charges,
                "cached_rdp": cached_rdp,
                "recomputed_rdp": recomputed_rdp,
                "cached_pure_epsilon": cached_pure_epsilon,
                "recomputed_pure_epsilon": recomputed_pure_epsilon,
                "consistent": consistent,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.charge_out import ChargeOut  # noqa: PLC0415

        d = dict(src_dict)
        dataset_id = d.pop("dataset_id")

        orders = cast(list[float], d.pop("orders"))

        charges = []
        _charges = d.pop("charges")
        for charges_item_data in _charges:
            charges_item = ChargeOut.from_dict(charges_item_data)

            charges.append(charges_item)

        cached_rdp = []
        _cached_rdp = d.pop("cached_rdp")
        for cached_rdp_item_data in _cached_rdp:

            def _parse_cached_rdp_item(data: object) -> float | None:
                if data is None:
                    return data
                return cast(float | None, data)

            cached_rdp_item = _parse_cached_rdp_item(cached_rdp_item_data)

            cached_rdp.append(cached_rdp_item)

        recomputed_rdp = []
        _recomputed_rdp = d.pop("recomputed_rdp")
        for recomputed_rdp_item_data in _recomputed_rdp:

            def _parse_recomputed_rdp_item(data: object) -> float | None:
                if data is None:
                    return data
                return cast(float | None, data)

            recomputed_rdp_item = _parse_recomputed_rdp_item(recomputed_rdp_item_data)

            recomputed_rdp.append(recomputed_rdp_item)

        cached_pure_epsilon = d.pop("cached_pure_epsilon")

        recomputed_pure_epsilon = d.pop("recomputed_pure_epsilon")

        consistent = d.pop("consistent")

        ledger_out = cls(
            dataset_id=dataset_id,
            orders=orders,
            charges=charges,
            cached_rdp=cached_rdp,
            recomputed_rdp=recomputed_rdp,
            cached_pure_epsilon=cached_pure_epsilon,
            recomputed_pure_epsilon=recomputed_pure_epsilon,
            consistent=consistent,
        )

        ledger_out.additional_properties = d
        return ledger_out

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
