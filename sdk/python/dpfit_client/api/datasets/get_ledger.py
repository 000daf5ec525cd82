from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.ledger_out import LedgerOut
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    dataset_id: str,
    *,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["limit"] = limit

    json_cursor: None | str | Unset
    if isinstance(cursor, Unset):
        json_cursor = UNSET
    else:
        json_cursor = cursor
    params["cursor"] = json_cursor

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/datasets/{dataset_id}/ledger".format(
            dataset_id=quote(str(dataset_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> LedgerOut | Problem | None:
    if response.status_code == 200:
        response_200 = LedgerOut.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[LedgerOut | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    dataset_id: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Response[LedgerOut | Problem]:
    """The dataset's ledger

     Every charge and refund (append-only), oldest first, one page of `charges` per call
    (`limit`, `cursor`, `X-Next-Cursor` as on the lists), with the cached total and its
    recomputation from ALL the rows on every page (recomputed only when the ledger may have
    changed: service/ledger/audit.py, ``AuditCache``).

    Pages follow the ledger's row ids: every charge and refund of a dataset is written under the
    dataset's row lock (service/ledger/admission.py), so ids grow in commit order within a
    dataset and a row written while a client pages is never skipped or repeated. The page is
    one query; the audit reads the dataset's stored totals and last row id in the same snapshot,
    and its rows once more only when those changed.

    Args:
        dataset_id (str):
        limit (int | Unset): Items per page (default 100, at most 1000). Default: 100.
        cursor (None | str | Unset): The `X-Next-Cursor` of the previous page (opaque); omit for
            the first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[LedgerOut | Problem]
    """

    kwargs = _get_kwargs(
        dataset_id=dataset_id,
        limit=limit,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    dataset_id: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> LedgerOut | Problem | None:
    """The dataset's ledger

     Every charge and refund (append-only), oldest first, one page of `charges` per call
    (`limit`, `cursor`, `X-Next-Cursor` as on the lists), with the cached total and its
    recomputation from ALL the rows on every page (recomputed only when the ledger may have
    changed: service/ledger/audit.py, ``AuditCache``).

    Pages follow the ledger's row ids: every charge and refund of a dataset is written under the
    dataset's row lock (service/ledger/admission.py), so ids grow in commit order within a
    dataset and a row written while a client pages is never skipped or repeated. The page is
    one query; the audit reads the dataset's stored totals and last row id in the same snapshot,
    and its rows once more only when those changed.

    Args:
        dataset_id (str):
        limit (int | Unset): Items per page (default 100, at most 1000). Default: 100.
        cursor (None | str | Unset): The `X-Next-Cursor` of the previous page (opaque); omit for
            the first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        LedgerOut | Problem
    """

    return sync_detailed(
        dataset_id=dataset_id,
        client=client,
        limit=limit,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    dataset_id: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Response[LedgerOut | Problem]:
    """The dataset's ledger

     Every charge and refund (append-only), oldest first, one page of `charges` per call
    (`limit`, `cursor`, `X-Next-Cursor` as on the lists), with the cached total and its
    recomputation from ALL the rows on every page (recomputed only when the ledger may have
    changed: service/ledger/audit.py, ``AuditCache``).

    Pages follow the ledger's row ids: every charge and refund of a dataset is written under the
    dataset's row lock (service/ledger/admission.py), so ids grow in commit order within a
    dataset and a row written while a client pages is never skipped or repeated. The page is
    one query; the audit reads the dataset's stored totals and last row id in the same snapshot,
    and its rows once more only when those changed.

    Args:
        dataset_id (str):
        limit (int | Unset): Items per page (default 100, at most 1000). Default: 100.
        cursor (None | str | Unset): The `X-Next-Cursor` of the previous page (opaque); omit for
            the first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[LedgerOut | Problem]
    """

    kwargs = _get_kwargs(
        dataset_id=dataset_id,
        limit=limit,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    dataset_id: str,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> LedgerOut | Problem | None:
    """The dataset's ledger

     Every charge and refund (append-only), oldest first, one page of `charges` per call
    (`limit`, `cursor`, `X-Next-Cursor` as on the lists), with the cached total and its
    recomputation from ALL the rows on every page (recomputed only when the ledger may have
    changed: service/ledger/audit.py, ``AuditCache``).

    Pages follow the ledger's row ids: every charge and refund of a dataset is written under the
    dataset's row lock (service/ledger/admission.py), so ids grow in commit order within a
    dataset and a row written while a client pages is never skipped or repeated. The page is
    one query; the audit reads the dataset's stored totals and last row id in the same snapshot,
    and its rows once more only when those changed.

    Args:
        dataset_id (str):
        limit (int | Unset): Items per page (default 100, at most 1000). Default: 100.
        cursor (None | str | Unset): The `X-Next-Cursor` of the previous page (opaque); omit for
            the first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        LedgerOut | Problem
    """

    return (
        await asyncio_detailed(
            dataset_id=dataset_id,
            client=client,
            limit=limit,
            cursor=cursor,
        )
    ).parsed
