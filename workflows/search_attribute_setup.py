"""Registering the calibration search attributes on any Temporal namespace, or saying who can.

The dev server takes them at start-up (``--search-attribute``), but a self-hosted server or
Temporal Cloud knows only what someone registered in the namespace, and until then it refuses
every ``calibrate`` (the start names the unknown attribute). So ``calibrator temporal setup``
registers them once per namespace through the operator service, and ``calibrate`` turns the
server's refusal into one line naming that command.

What the server answers decides what the user must do, so every answer is mapped here, once:

* listed with the right type: nothing to do (idempotent: a second run says "already present");
* listed with another type: an error (Temporal cannot change a type; the attribute must be
  removed by whoever owns the namespace, or the workflows would write values it mis-indexes);
* ``ALREADY_EXISTS`` when adding: present (a concurrent setup, or a server that cannot list);
* ``PERMISSION_DENIED`` / ``UNIMPLEMENTED`` when adding (Temporal Cloud answers so for an API key
  or a namespace-scoped certificate: search attributes are account administration there):
  ``SearchAttributesRefused``, whose message names the tcld / UI / ``temporal operator`` path;
* ``NOT_FOUND``: the namespace does not exist, which is bad input (``NamespaceNotFound``);
* anything else: ``SearchAttributeSetupError`` with the server's message.

The server is reached through ``SearchAttributeAdmin`` (``OperatorAdmin`` in production), so
these rules are unit-tested without a server and proven on the real dev server in
tests/workflows/test_search_attribute_setup_dev_server.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.domain.errors import InputError
from workflows import search_attributes

SETUP_COMMAND = "calibrator temporal setup"
KEYWORD = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
CREATED = "created"
PRESENT = "already present"
# What the calibration workflows write: every attribute is a Keyword (search_attributes.ALL).
WANTED: tuple[str, ...] = tuple(key.name for key in search_attributes.ALL)
# The server's words for "start refused: that attribute is not registered": SQL visibility
# (the dev server, PostgreSQL, MySQL) and Elasticsearch visibility respectively.
_UNKNOWN_ATTRIBUTE_PHRASES = ("has no mapping defined for search attribute", "is not defined")


class SearchAttributeSetupError(Exception):
    """The server did not register the attributes (environment failure: the CLI exits 1)."""


class SearchAttributesRefused(SearchAttributeSetupError):
    """The server does not let this client add search attributes; the message says who can."""


class NamespaceNotFound(InputError):
    """The namespace given does not exist on the server (bad input: exit 2, nothing changed)."""


class MissingSearchAttributes(Exception):
    """A start the server refused because the namespace lacks a calibration search attribute."""


@dataclass(frozen=True)
class AttributeState:
    """One attribute after setup: its name, type and whether this run created it."""

    name: str
    type: str
    status: str


@dataclass(frozen=True)
class Registration:
    """What ``ensure_search_attributes`` found and did in one namespace."""

    namespace: str
    attributes: tuple[AttributeState, ...]

    @property
    def created(self) -> tuple[str, ...]:
        """Names this run added (empty: everything was already there)."""
        return tuple(a.name for a in self.attributes if a.status == CREATED)


class SearchAttributeAdmin(Protocol):
    """The two operator-service calls setup needs; both raise ``RPCError`` as the SDK does."""

    async def listed(self, namespace: str) -> Mapping[str, int]:
        """Every search attribute of the namespace (custom and system) and its type."""
        ...

    async def add(self, namespace: str, names: tuple[str, ...]) -> None:
        """Add ``names`` as Keyword attributes."""
        ...


@dataclass(frozen=True)
class OperatorAdmin:
    """``SearchAttributeAdmin`` over a connected client's operator service."""

    client: Client

    async def listed(self, namespace: str) -> Mapping[str, int]:
        """The namespace's custom and system attributes, from ListSearchAttributes."""
        answer = await self.client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        return {**answer.system_attributes, **answer.custom_attributes}

    async def add(self, namespace: str, names: tuple[str, ...]) -> None:
        """AddSearchAttributes with every name as a Keyword."""
        await self.client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace, search_attributes=dict.fromkeys(names, KEYWORD)
            )
        )


def manual_steps(namespace: str) -> str:
    """How someone allowed to administer the namespace registers the attributes by hand."""
    tcld = " ".join(f"--search-attribute {name}=Keyword" for name in WANTED)
    cli = " ".join(f"--name {name}" for name in WANTED)
    return (
        f"on Temporal Cloud an account or namespace admin adds them once: `tcld namespace "
        f"search-attributes add --namespace {namespace} {tcld}`, or in the Cloud UI (Namespaces > "
        f"{namespace} > Edit > Custom Search Attributes, type Keyword); on a self-hosted server "
        f"its operator runs `temporal operator search-attribute create --namespace {namespace} "
        f"{cli} --type Keyword`"
    )


def _type_name(value: int) -> str:
    """``INDEXED_VALUE_TYPE_KEYWORD_LIST`` -> ``KeywordList``, as the Temporal CLI spells types."""
    name = IndexedValueType.Name(value)  # type: ignore[arg-type]  # the stubs want the enum
    return "".join(part.title() for part in name.removeprefix("INDEXED_VALUE_TYPE_").split("_"))


def _status_name(err: RPCError) -> str:
    return err.status.name if err.status is not None else "UNKNOWN"


def _failure(err: RPCError, namespace: str, doing: str) -> Exception:
    """The error for an operator-service answer that is not success (see the module docstring)."""
    if err.status == RPCStatusCode.NOT_FOUND:
        return NamespaceNotFound(f"Temporal namespace {namespace!r} does not exist: {err.message}")
    if err.status in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
        return SearchAttributesRefused(
            f"the Temporal server does not let this client {doing} in namespace {namespace} "
            f"({_status_name(err)}: {err.message}); {manual_steps(namespace)}; then run "
            f"`{SETUP_COMMAND}` again to check"
        )
    return SearchAttributeSetupError(
        f"could not {doing} in namespace {namespace} ({_status_name(err)}: {err.message})"
    )


async def ensure_search_attributes(admin: SearchAttributeAdmin, namespace: str) -> Registration:
    """Register every calibration attribute ``namespace`` lacks; say which were already there.

    Listing first keeps a second run from asking for a write it does not need (so it succeeds
    on a server where this client may read but not administer, once the attributes exist). A
    server that cannot list (the time-skipping test server: ``UNIMPLEMENTED``) or may not
    (``PERMISSION_DENIED``) is asked to add all, and "already exists" then means present.
    """
    known: Mapping[str, int] | None
    try:
        known = await admin.listed(namespace)
    except RPCError as err:
        if err.status not in (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.PERMISSION_DENIED):
            raise _failure(err, namespace, "list search attributes") from None
        known = None
    if known is not None:
        wrong = {n: _type_name(known[n]) for n in WANTED if n in known and known[n] != KEYWORD}
        if wrong:
            listed = ", ".join(f"{n} as {t}" for n, t in sorted(wrong.items()))
            raise SearchAttributeSetupError(
                f"namespace {namespace} already has {listed}, but the calibration workflows "
                "write Keyword values; Temporal cannot change a search attribute's type, so "
                "whoever administers the namespace must remove it (or use another namespace) "
                f"before `{SETUP_COMMAND}`"
            )
    missing = tuple(n for n in WANTED if known is None or n not in known)
    created: tuple[str, ...] = ()
    if missing:
        try:
            await admin.add(namespace, missing)
            created = missing
        except RPCError as err:
            if err.status != RPCStatusCode.ALREADY_EXISTS:
                raise _failure(err, namespace, "add search attributes") from None
    return Registration(
        namespace,
        tuple(AttributeState(n, "Keyword", CREATED if n in created else PRESENT) for n in WANTED),
    )


def missing_attribute(err: RPCError) -> str | None:
    """The calibration attribute a refused start names as unregistered, else None.

    The server refuses the start with ``INVALID_ARGUMENT`` and "Namespace N has no mapping
    defined for search attribute X" (SQL visibility) or "search attribute X is not defined"
    (Elasticsearch); only our own attribute names count, so any other invalid argument keeps
    its own message.
    """
    if err.status != RPCStatusCode.INVALID_ARGUMENT:
        return None
    message = err.message
    if not any(phrase in message for phrase in _UNKNOWN_ATTRIBUTE_PHRASES):
        return None
    return next((name for name in WANTED if name in message), None)


def missing_hint(namespace: str, names: Sequence[str]) -> str:
    """The one line a refused start becomes: what is missing and the command that fixes it."""
    which = ", ".join(names)
    return (
        f"Temporal namespace {namespace} lacks the search attribute(s) {which} that the "
        f"calibration workflows set: run `{SETUP_COMMAND}` with the same connection settings, "
        "once per namespace (docs/deploy.md)"
    )


async def require_search_attributes(admin: SearchAttributeAdmin, namespace: str) -> None:
    """Raise ``MissingSearchAttributes`` when a listing shows a calibration attribute missing.

    For what starts calibrations later, not now (a schedule: its ticks would fail inside the
    workflow, long after the command said yes). A server that cannot or may not list is not
    refused here: the start itself will say so, as ``calibrate`` does.
    """
    try:
        known = await admin.listed(namespace)
    except RPCError as err:
        if err.status in (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.PERMISSION_DENIED):
            return
        raise
    missing = [n for n in WANTED if n not in known]
    if missing:
        raise MissingSearchAttributes(missing_hint(namespace, missing))
