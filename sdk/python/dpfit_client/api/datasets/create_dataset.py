from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.dataset_create import DatasetCreate
from ...models.dataset_out import DatasetOut
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: DatasetCreate,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/datasets",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> DatasetOut | Problem | None:
    if response.status_code == 201:
        response_201 = DatasetOut.from_dict(response.json())

        return response_201

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
) -> Response[DatasetOut | Problem]:
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
) -> Response[DatasetOut | Problem]:
    """Register a dataset

     Register a source (under a data root open to the caller) with its public schema and
    budget.

    Parses the whole source with the workers' reader and answers with the validation report
    (shown to the owner and admins only). `strict` decides what the report refuses (422 naming
    the field): by default a source most of whose non-empty labels are outside the declared
    values; `true`: any such label and any non-number in a numeric column; `false`: nothing.
    A source whose location (or a folder holding it, or a file inside it) already backs a
    dataset, or whose content already backs one of the caller's own datasets, is refused with
    409 (one budget per data; the existing id is named only to its owner and admins). Content
    is never compared with other owners' datasets: an equal copy registers, and admins see it
    in `duplicates`. n and the fingerprint are fixed here; a job on a changed source fails.
    Try a body first with `POST /v1/datasets/validate`.

    Args:
        body (DatasetCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DatasetOut | Problem]
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
) -> DatasetOut | Problem | None:
    """Register a dataset

     Register a source (under a data root open to the caller) with its public schema and
    budget.

    Parses the whole source with the workers' reader and answers with the validation report
    (shown to the owner and admins only). `strict` decides what the report refuses (422 naming
    the field): by default a source most of whose non-empty labels are outside the declared
    values; `true`: any such label and any non-number in a numeric column; `false`: nothing.
    A source whose location (or a folder holding it, or a file inside it) already backs a
    dataset, or whose content already backs one of the caller's own datasets, is refused with
    409 (one budget per data; the existing id is named only to its owner and admins). Content
    is never compared with other owners' datasets: an equal copy registers, and admins see it
    in `duplicates`. n and the fingerprint are fixed here; a job on a changed source fails.
    Try a body first with `POST /v1/datasets/validate`.

    Args:
        body (DatasetCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DatasetOut | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: DatasetCreate,
) -> Response[DatasetOut | Problem]:
    """Register a dataset

     Register a source (under a data root open to the caller) with its public schema and
    budget.

    Parses the whole source with the workers' reader and answers with the validation report
    (shown to the owner and admins only). `strict` decides what the report refuses (422 naming
    the field): by default a source most of whose non-empty labels are outside the declared
    values; `true`: any such label and any non-number in a numeric column; `false`: nothing.
    A source whose location (or a folder holding it, or a file inside it) already backs a
    dataset, or whose content already backs one of the caller's own datasets, is refused with
    409 (one budget per data; the existing id is named only to its owner and admins). Content
    is never compared with other owners' datasets: an equal copy registers, and admins see it
    in `duplicates`. n and the fingerprint are fixed here; a job on a changed source fails.
    Try a body first with `POST /v1/datasets/validate`.

    Args:
        body (DatasetCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[DatasetOut | Problem]
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
) -> DatasetOut | Problem | None:
    """Register a dataset

     Register a source (under a data root open to the caller) with its public schema and
    budget.

    Parses the whole source with the workers' reader and answers with the validation report
    (shown to the owner and admins only). `strict` decides what the report refuses (422 naming
    the field): by default a source most of whose non-empty labels are outside the declared
    values; `true`: any such label and any non-number in a numeric column; `false`: nothing.
    A source whose location (or a folder holding it, or a file inside it) already backs a
    dataset, or whose content already backs one of the caller's own datasets, is refused with
    409 (one budget per data; the existing id is named only to its owner and admins). Content
    is never compared with other owners' datasets: an equal copy registers, and admins see it
    in `duplicates`. n and the fingerprint are fixed here; a job on a changed source fails.
    Try a body first with `POST /v1/datasets/validate`.

    Args:
        body (DatasetCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        DatasetOut | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
