from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.dataset_create import DatasetCreate
from ...models.dataset_validation_out import DatasetValidationOut
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: DatasetCreate,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/datasets/validate",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> DatasetValidationOut | Problem | None:
    if response.status_code == 200:
        response_200 = DatasetValidationOut.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[DatasetValidationOut | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: DatasetCreate,
) -> Response[DatasetValidationOut | Problem]:
    """Validate a registration without creating anything (dry run)

     Run every check of `POST /v1/datasets` on the body — roots, columns, one budget per
    data, the whole source parsed with the workers' reader — and answer with the validation
    report and whether the registration would succeed, creating nothing. What registration
    refuses before the report is refused here the same way (422, 409); the label rule's or
    strict mode's refusal comes back in `refusal`, beside the report it was read from.

    Args:
        body (DatasetCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DatasetValidationOut | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: DatasetCreate,
) -> DatasetValidationOut | Problem | None:
    """Validate a registration without creating anything (dry run)

     Run every check of `POST /v1/datasets` on the body — roots, columns, one budget per
    data, the whole source parsed with the workers' reader — and answer with the validation
    report and whether the registration would succeed, creating nothing. What registration
    refuses before the report is refused here the same way (422, 409); the label rule's or
    strict mode's refusal comes back in `refusal`, beside the report it was read from.

    Args:
        body (DatasetCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DatasetValidationOut | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: DatasetCreate,
) -> Response[DatasetValidationOut | Problem]:
    """Validate a registration without creating anything (dry run)

     Run every check of `POST /v1/datasets` on the body — roots, columns, one budget per
    data, the whole source parsed with the workers' reader — and answer with the validation
    report and whether the registration would succeed, creating nothing. What registration
    refuses before the report is refused here the same way (422, 409); the label rule's or
    strict mode's refusal comes back in `refusal`, beside the report it was read from.

    Args:
        body (DatasetCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DatasetValidationOut | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: DatasetCreate,
) -> DatasetValidationOut | Problem | None:
    """Validate a registration without creating anything (dry run)

     Run every check of `POST /v1/datasets` on the body — roots, columns, one budget per
    data, the whole source parsed with the workers' reader — and answer with the validation
    report and whether the registration would succeed, creating nothing. What registration
    refuses before the report is refused here the same way (422, 409); the label rule's or
    strict mode's refusal comes back in `refusal`, beside the report it was read from.

    Args:
        body (DatasetCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DatasetValidationOut | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
