"""The 422 field is a path of the request body (service/api/errors.py): pydantic's union tags
and union member names are dropped by one generic rule, never case by case."""

from __future__ import annotations

from service.api.app import create_app
from service.api.errors import UnionTags, body_field, untagged
from service.settings import Settings

UNIONS = UnionTags(
    properties=frozenset({"type"}),
    tags=frozenset({"logistic_regression", "numeric", "categorical"}),
    fields=frozenset({"name", "budget", "l2", "min", "max", "categories", "type"}),
)


def test_a_discriminated_union_tag_is_dropped() -> None:
    body = {"model": {"type": "logistic_regression", "l2": -1}}
    assert body_field(("body", "model", "logistic_regression", "l2"), body, UNIONS) == "model.l2"
    features = {"features": [{"type": "categorical", "categories": []}]}
    loc = ("body", "features", 0, "categorical", "categories")
    assert body_field(loc, features, UNIONS) == "features.0.categories"
    assert body_field(("body", "features", 0, "categorical"), features, UNIONS) == "features.0"


def test_a_missing_key_is_kept_even_when_it_equals_a_value() -> None:
    """Only the discriminating property's value is a tag: a required field whose name happens
    to be another field's value stays (``{"name": "budget"}`` lacks ``budget``)."""
    assert body_field(("body", "budget"), {"name": "budget"}, UNIONS) == "budget"
    body = {"features": [{"type": "numeric", "name": "max", "min": 1}]}
    loc = ("body", "features", 0, "numeric", "max")
    assert body_field(loc, body, UNIONS) == "features.0.max"


def test_a_plain_union_member_name_is_dropped() -> None:
    body = {"label": {"negative": [1]}, "features": [{"categories": [None]}]}
    assert body_field(("body", "label", "negative", "str"), body, UNIONS) == "label.negative"
    loc = ("body", "features", 0, "categories", 0, "int")
    assert body_field(loc, body, UNIONS) == "features.0.categories.0"


def test_other_locations_keep_their_prefix() -> None:
    assert body_field(("query", "limit"), None, UNIONS) == "query.limit"
    assert body_field(("body",), None, UNIONS) == "body"


def test_a_field_given_without_its_body_loses_its_tag_only() -> None:
    assert untagged("model.logistic_regression.l2", UNIONS) == "model.l2"
    assert untagged("model.type", UNIONS) == "model.type"
    assert untagged("numeric", UNIONS) == "numeric"  # never the first part
    assert untagged(None, UNIONS) is None


def test_the_app_tags_are_read_from_its_openapi_document() -> None:
    app = create_app(
        Settings(database_url="sqlite://", data_roots=(), workers=1, dask_scheduler=None)
    )
    unions = UnionTags.of_openapi(app.openapi())
    assert unions.properties == {"type"}
    assert {"logistic_regression", "huber_regression", "numeric", "categorical"} <= unions.tags
    assert not unions.tags & unions.fields
