"""Every operator-service answer setup can get, mapped to what the user must do (no server).

The server is the ``SearchAttributeAdmin`` port, faked here with scripted answers; the real dev
server runs the same paths in test_search_attribute_setup_dev_server.py. Refusals that the dev
server never gives (PERMISSION_DENIED, UNIMPLEMENTED: Temporal Cloud's answers) are covered here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.service import RPCError, RPCStatusCode

from workflows.search_attribute_setup import (
    CREATED,
    KEYWORD,
    PRESENT,
    WANTED,
    MissingSearchAttributes,
    NamespaceNotFound,
    SearchAttributeSetupError,
    SearchAttributesRefused,
    ensure_search_attributes,
    missing_attribute,
    require_search_attributes,
)

NS = "prod.acct"
TEXT = IndexedValueType.INDEXED_VALUE_TYPE_TEXT


def rpc(status: RPCStatusCode, message: str = "no") -> RPCError:
    return RPCError(message, status, b"")


@dataclass
class FakeAdmin:
    """Answers ListSearchAttributes from ``known`` (or raises ``list_error``); records adds."""

    known: dict[str, int] = field(default_factory=dict)
    list_error: RPCError | None = None
    add_error: RPCError | None = None
    added: list[tuple[str, ...]] = field(default_factory=list)

    async def listed(self, namespace: str) -> Mapping[str, int]:
        assert namespace == NS
        if self.list_error is not None:
            raise self.list_error
        return dict(self.known)

    async def add(self, namespace: str, names: tuple[str, ...]) -> None:
        assert namespace == NS
        if self.add_error is not None:
            raise self.add_error
        self.added.append(names)
        self.known.update(dict.fromkeys(names, KEYWORD))


def ensure(admin: FakeAdmin) -> dict[str, str]:
    registration = asyncio.run(ensure_search_attributes(admin, NS))
    assert registration.namespace == NS
    assert [a.type for a in registration.attributes] == ["Keyword"] * len(WANTED)
    return {a.name: a.status for a in registration.attributes}


def test_adds_what_is_missing_and_a_second_run_changes_nothing() -> None:
    admin = FakeAdmin(known={"WorkflowId": KEYWORD, "CalibrationTarget": KEYWORD})
    first = ensure(admin)
    assert first == {
        "CalibrationTarget": PRESENT,
        "CalibrationPhase": CREATED,
        "ClusterName": CREATED,
    }
    assert admin.added == [("CalibrationPhase", "ClusterName")]
    second = ensure(admin)
    assert set(second.values()) == {PRESENT}
    assert admin.added == [("CalibrationPhase", "ClusterName")], "no write when all are present"


@pytest.mark.parametrize(
    ("list_error", "add_error", "statuses"),
    [
        # A server that cannot list (the time-skipping test server) or may not: add all.
        (rpc(RPCStatusCode.UNIMPLEMENTED), None, {CREATED}),
        (rpc(RPCStatusCode.PERMISSION_DENIED), None, {CREATED}),
        # ... and "already exists" then means present (a concurrent setup, too).
        (rpc(RPCStatusCode.UNIMPLEMENTED), rpc(RPCStatusCode.ALREADY_EXISTS), {PRESENT}),
        (None, rpc(RPCStatusCode.ALREADY_EXISTS), {PRESENT}),
    ],
)
def test_answers_that_still_mean_success(
    list_error: RPCError | None, add_error: RPCError | None, statuses: set[str]
) -> None:
    admin = FakeAdmin(list_error=list_error, add_error=add_error)
    assert set(ensure(admin).values()) == statuses


@pytest.mark.parametrize(
    ("list_error", "add_error", "error", "words"),
    [
        # Temporal Cloud: adding is account administration; the message says who and how.
        (
            None,
            rpc(RPCStatusCode.PERMISSION_DENIED, "Request unauthorized."),
            SearchAttributesRefused,
            [
                "PERMISSION_DENIED: Request unauthorized.",
                f"tcld namespace search-attributes add --namespace {NS} "
                "--search-attribute CalibrationTarget=Keyword "
                "--search-attribute CalibrationPhase=Keyword "
                "--search-attribute ClusterName=Keyword",
                "Cloud UI",
                f"temporal operator search-attribute create --namespace {NS} "
                "--name CalibrationTarget --name CalibrationPhase --name ClusterName "
                "--type Keyword",
                "run `calibrator temporal setup` again",
            ],
        ),
        (
            rpc(RPCStatusCode.UNIMPLEMENTED),
            rpc(RPCStatusCode.UNIMPLEMENTED, "method AddSearchAttributes not implemented"),
            SearchAttributesRefused,
            ["UNIMPLEMENTED", "tcld namespace search-attributes add"],
        ),
        (
            None,
            rpc(RPCStatusCode.NOT_FOUND, "Namespace prod.acct is not found."),
            NamespaceNotFound,
            [f"Temporal namespace {NS!r} does not exist"],
        ),
        (
            rpc(RPCStatusCode.NOT_FOUND, "Namespace prod.acct is not found."),
            None,
            NamespaceNotFound,
            [f"Temporal namespace {NS!r} does not exist"],
        ),
        (
            rpc(RPCStatusCode.UNAVAILABLE, "connection refused"),
            None,
            SearchAttributeSetupError,
            ["could not list search attributes", "UNAVAILABLE: connection refused"],
        ),
        (
            None,
            rpc(RPCStatusCode.INVALID_ARGUMENT, "Unable to create search attributes: limit"),
            SearchAttributeSetupError,
            ["could not add search attributes", "INVALID_ARGUMENT: Unable to create"],
        ),
    ],
)
def test_refusals_name_what_to_do(
    list_error: RPCError | None,
    add_error: RPCError | None,
    error: type[Exception],
    words: list[str],
) -> None:
    with pytest.raises(error) as raised:
        ensure(FakeAdmin(list_error=list_error, add_error=add_error))
    assert type(raised.value) is error
    for word in words:
        assert word in str(raised.value)


def test_an_attribute_of_another_type_is_an_error_and_nothing_is_added() -> None:
    admin = FakeAdmin(known={"ClusterName": TEXT})
    with pytest.raises(SearchAttributeSetupError, match="ClusterName as Text") as raised:
        ensure(admin)
    assert "cannot change a search attribute's type" in str(raised.value)
    assert admin.added == []


@pytest.mark.parametrize(
    ("status", "message", "missing"),
    [
        (
            RPCStatusCode.INVALID_ARGUMENT,
            "Namespace prod has no mapping defined for search attribute CalibrationTarget",
            "CalibrationTarget",
        ),
        (
            RPCStatusCode.INVALID_ARGUMENT,
            "search attribute ClusterName is not defined",
            "ClusterName",
        ),
        # Someone else's attribute, another invalid argument, another status: not ours to name.
        (RPCStatusCode.INVALID_ARGUMENT, "search attribute Owner is not defined", None),
        (RPCStatusCode.INVALID_ARGUMENT, "CalibrationTarget value is too long", None),
        (RPCStatusCode.UNAVAILABLE, "search attribute CalibrationPhase is not defined", None),
    ],
)
def test_a_refused_start_is_recognised_only_for_our_attributes(
    status: RPCStatusCode, message: str, missing: str | None
) -> None:
    assert missing_attribute(rpc(status, message)) == missing


def test_require_refuses_a_namespace_without_them_and_trusts_a_server_that_cannot_list() -> None:
    with pytest.raises(MissingSearchAttributes) as raised:
        asyncio.run(require_search_attributes(FakeAdmin(known={"ClusterName": KEYWORD}), NS))
    assert "CalibrationTarget, CalibrationPhase" in str(raised.value)
    assert "run `calibrator temporal setup`" in str(raised.value)
    complete = FakeAdmin(known=dict.fromkeys(WANTED, KEYWORD))
    asyncio.run(require_search_attributes(complete, NS))
    for status in (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.PERMISSION_DENIED):
        asyncio.run(require_search_attributes(FakeAdmin(list_error=rpc(status)), NS))
    with pytest.raises(RPCError):
        asyncio.run(
            require_search_attributes(FakeAdmin(list_error=rpc(RPCStatusCode.UNAVAILABLE)), NS)
        )
