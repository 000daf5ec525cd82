from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.charge_out_kind import ChargeOutKind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.charge_out_event import ChargeOutEvent


T = TypeVar("T", bound="ChargeOut")


@_attrs_define
class ChargeOut:
    """
    Attributes:
        id (int):
        job_id (str):
        principal (str):
        kind (ChargeOutKind):
        epsilon (float):
        delta (float):
        rdp (list[float | None]): RDP curve at `orders` (null = infinite).
        pure_epsilon (float | None):
        event (ChargeOutEvent):
        created_at (datetime.datetime):
        gdp_mu (float | None | Unset): Exact μ of a Gaussian-family job (null: Rényi curve only).
    """

    id: int
    job_id: str
    principal: str
    kind: ChargeOutKind
    epsilon: float
    delta: float
    rdp: list[float | None]
    pure_epsilon: float | None
    event: ChargeOutEvent
    created_at: datetime.datetime
    gdp_mu: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        job_id = self.job_id

        principal = self.principal

        kind = self.kind.value

        epsilon = self.epsilon

        delta = self.delta

        rdp = []
        for rdp_item_data in self.rdp:
            rdp_item: float | None
            rdp_item = rdp_item_data
            rdp.append(rdp_item)

        pure_epsilon: float | None
        pure_epsilon = self.pure_epsilon

        event = self.event.to_dict()

        created_at = self.created_at.isoformat()

        gdp_mu: float | None | Unset
        if isinstance(self.gdp_mu, Unset):
            gdp_mu = UNSET
        else:
            gdp_mu = self.gdp_mu

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "job_id": job_id,
                "principal": principal,
                "kind": kind,
                "epsilon": epsilon,
                "delta": delta,
                "rdp": rdp,
                "pure_epsilon": pure_epsilon,
                "event": event,
                "created_at": created_at,
            }
        )
        if gdp_mu is not UNSET:
            field_dict["gdp_mu"] = gdp_mu

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.charge_out_event import ChargeOutEvent  # noqa: PLC0415

        d = dict(src_dict)
        id = d.pop("id")

        job_id = d.pop("job_id")

        principal = d.pop("principal")

        kind = ChargeOutKind(d.pop("kind"))

        epsilon = d.pop("epsilon")

        delta = d.pop("delta")

        rdp = []
        _rdp = d.pop("rdp")
        for rdp_item_data in _rdp:

            def _parse_rdp_item(data: object) -> float | None:
                if data is None:
                    return data
                return cast(float | None, data)

            rdp_item = _parse_rdp_item(rdp_item_data)

            rdp.append(rdp_item)

        def _parse_pure_epsilon(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        pure_epsilon = _parse_pure_epsilon(d.pop("pure_epsilon"))

        event = ChargeOutEvent.from_dict(d.pop("event"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_gdp_mu(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        gdp_mu = _parse_gdp_mu(d.pop("gdp_mu", UNSET))

        charge_out = cls(
            id=id,
            job_id=job_id,
            principal=principal,
            kind=kind,
            epsilon=epsilon,
            delta=delta,
            rdp=rdp,
            pure_epsilon=pure_epsilon,
            event=event,
            created_at=created_at,
            gdp_mu=gdp_mu,
        )

        charge_out.additional_properties = d
        return charge_out

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
