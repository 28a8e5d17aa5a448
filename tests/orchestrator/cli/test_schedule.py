"""``calibrator schedule`` and the connection flags: bad input is one line, exit 2, nothing sent.

These never reach a server: every case fails before connecting (the address is a closed port, so
reaching it would be exit 1, not 2).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import fields
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.cli.temporal import ConnectionFlags, connection_options

runner = CliRunner()
# A closed port, and nothing from the machine's own Temporal settings.
CLOSED = ["--address", "127.0.0.1:1", "--disable-config-file", "--disable-config-env"]
GOOD = "kind: CalibrationPolicy\nrules: {channel: stable}\n"


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(GOOD)
    return path


@pytest.mark.parametrize(
    ("argv", "text", "message"),
    [
        (["create", "Bad_Name", "--every", "1h"], GOOD, "invalid schedule name 'Bad_Name'"),
        (["create", "p", "--every", "1h", "--cron", "0 3 * * *"], GOOD, "exactly one of --every"),
        (["create", "p"], GOOD, "exactly one of --every"),
        (["create", "p", "--every", "30s"], GOOD, "--every: at least 1 minute"),
        (["create", "p", "--every", "soon"], GOOD, "--every"),
        (["create", "p", "--every", "1h"], "rules: {channel: fast}\n", "policy.rules.channel"),
        (["create", "p", "--every", "1h"], "rules: {}\n", "name at least one rule"),
        (["create", "p", "--every", "1h"], "- a\n- b\n", "policy: expected a mapping"),
        (
            ["create", "p", "--every", "1h"],
            "rules: {channel: patch}\nstrategy: {stages: [{name: x, soak: forever}]}\n",
            "policy.strategy.stages[0].soak",
        ),
    ],
)
def test_bad_schedule_input_fails_before_connecting(
    tmp_path: Path, argv: list[str], text: str, message: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["schedule", *argv, "--policy", str(path), *CLOSED])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


WEEKLY = ["create", "p", "--cron", "0 2 * * Sat"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["create", "p", "--cron", "0 2 * * 8"], "--cron: day of week '8': 8 is out of range 0-7"),
        (["create", "p", "--cron", "0 2 * *"], "--cron: '0 2 * *' has 4 field(s), expected 5"),
        (["create", "p", "--cron", "@every 1h"], "--cron: use --every for an interval"),
        (["create", "p", "--cron", "CRON_TZ=UTC 0 2 * * *"], "give the time zone with --time-zone"),
        ([*WEEKLY, "--time-zone", "Mars/Olympus"], "--time-zone: unknown time zone 'Mars/Olympus'"),
        ([*WEEKLY, "--time-zone", "europe/berlin"], "unknown time zone 'europe/berlin'"),
        ([*WEEKLY, "--time-zone", "+02:00"], "--time-zone: expected an IANA name"),
        ([*WEEKLY, "--time-zone", "../../etc/passwd"], "--time-zone: expected an IANA name"),
        ([*WEEKLY, "--time-zone", " UTC"], "--time-zone: expected an IANA name"),
        (["create", "p", "--every", "1h", "--time-zone", "Europe/Berlin"], "applies to --cron"),
        ([*WEEKLY, "--jitter", "25h"], "--jitter: between 0s and 1d"),
        ([*WEEKLY, "--jitter", "-1m"], "--jitter: invalid duration"),
        ([*WEEKLY, "--jitter", "soon"], "--jitter: invalid duration 'soon'"),
        (["create", "p", "--every", "1h", "--jitter", "1h"], "must be shorter than the interval"),
        ([*WEEKLY, "--catchup-window", "30s"], "--catchup-window: between 1m and 365d"),
        ([*WEEKLY, "--catchup-window", "366d"], "--catchup-window: between 1m and 365d"),
        ([*WEEKLY, "--catchup-window", "1 h"], "--catchup-window: invalid duration"),
        ([*WEEKLY, "--note", "two\nlines"], "--note: one line"),
        (["update", "p"], "nothing to update"),
        (["update", "Bad_Name", "--jitter", "1m"], "invalid schedule name 'Bad_Name'"),
        (["update", "p", "--cron", "61 * * * *"], "--cron: minute '61'"),
        (["update", "p", "--every", "1h", "--cron", "0 2 * * *"], "only one of --every"),
        (["update", "p", "--every", "1h", "--time-zone", "Asia/Tokyo"], "applies to --cron"),
        (["update", "p", "--time-zone", "Nowhere"], "unknown time zone 'Nowhere'"),
        (["update", "p", "--catchup-window", "0"], "--catchup-window: between 1m"),
        (["update", "p", "--jitter", "2d"], "--jitter: between 0s and 1d"),
        (["pause", "p", "--note", "a\nb"], "--note: one line"),
        (["unpause", "p", "--reason", "x" * 1001], "--note: one line of at most 1000"),
    ],
)
def test_bad_timetable_input_fails_before_connecting(
    policy_file: Path, argv: list[str], message: str
) -> None:
    takes_policy = argv[0] == "create"
    extra = ["--policy", str(policy_file)] if takes_policy else []
    result = runner.invoke(app, ["schedule", *argv, *extra, *CLOSED])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_update_with_a_bad_policy_file_fails_before_connecting(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("rules: {channel: fast}\n")
    result = runner.invoke(app, ["schedule", "update", "p", "--policy", str(path), *CLOSED])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "policy.rules.channel" in result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        [*WEEKLY, "--time-zone", "Europe/Berlin", "--jitter", "5m", "--catchup-window", "1h"],
        [*WEEKLY, "--time-zone", "UTC", "--jitter", "0", "--catchup-window", "365d"],
        ["create", "p", "--every", "1h", "--jitter", "59m", "--time-zone", "UTC"],
    ],
)
def test_good_timetables_fail_only_on_the_unreachable_server(
    policy_file: Path, argv: list[str]
) -> None:
    result = runner.invoke(app, ["schedule", *argv, "--policy", str(policy_file), *CLOSED])
    assert result.exit_code == 1, result.output
    assert "cannot reach Temporal at 127.0.0.1:1" in result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["update", "p", "--cron", "0 2 * * Sat", "--time-zone", "Europe/Berlin"],
        ["update", "p", "--jitter", "0"],
        ["update", "p", "--note", "frozen for the release"],
        ["pause", "p", "--note", "frozen for the release"],
        ["unpause", "p", "--reason", "release done"],
    ],
)
def test_good_changes_fail_only_on_the_unreachable_server(argv: list[str]) -> None:
    result = runner.invoke(app, ["schedule", *argv, *CLOSED])
    assert result.exit_code == 1, result.output
    assert "cannot reach Temporal at 127.0.0.1:1" in result.stderr


def test_a_missing_policy_file_is_bad_input(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["schedule", "create", "p", "--every", "1h", "--policy", str(tmp_path / "nope"), *CLOSED],
    )
    assert result.exit_code == 2
    assert "policy file" in result.stderr and "does not exist" in result.stderr


def test_a_good_schedule_then_fails_only_on_the_unreachable_server(policy_file: Path) -> None:
    result = runner.invoke(
        app, ["schedule", "create", "p", "--every", "1h", "--policy", str(policy_file), *CLOSED]
    )
    assert result.exit_code == 1
    assert "cannot reach Temporal at 127.0.0.1:1 (namespace default, plaintext" in result.stderr


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["schedule", "list"], {"TEMPORAL_TLS": "maybe"}, "TEMPORAL_TLS='maybe'"),
        (["status", "x"], {"TEMPORAL_PROFILE": "prod"}, "profile 'prod'"),
        (["schedule", "describe", "x", "--profile", "prod"], {}, "Profile 'prod' not found"),
        (["abort", "x", "--tls-cert-path", "/etc/hostname"], {}, "mTLS needs both"),
        (
            ["calibrate", "-t", "v1.34.0", "--config-file", "/nonexistent.toml"],
            {},
            "config file /nonexistent.toml does not exist",
        ),
        (["worker", "--tls-ca-path", "/nonexistent/ca.pem"], {}, "TLS server CA file"),
    ],
)
def test_bad_connection_settings_fail_before_connecting(
    tmp_path: Path, argv: list[str], env: dict[str, str], message: str
) -> None:
    config = tmp_path / "empty.toml"
    config.write_text("")
    full_env = {"TEMPORAL_CONFIG_FILE": str(config), **env}
    result = runner.invoke(app, argv, env=full_env)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("at", "due", "deferred"),
    [
        ("2026-12-03T10:00:00+00:00", 3, 5),  # Thursday: prod waits for its weekend window
        ("2026-12-05T03:00:00+00:00", 8, 0),  # Saturday 03:00: inside it
    ],
)
def test_check_previews_a_tick_offline(at: str, due: int, deferred: int) -> None:
    argv = ["schedule", "check", "-p", str(REPO / "examples/policy.yaml"), "-o", "json"]
    result = runner.invoke(app, [*argv, "-s", str(REPO / "examples/fleet.yaml"), "--at", at])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["counts"]["due"], doc["counts"]["deferred"]) == (due, deferred)
    assert [c["target"] for c in doc["calibrations"]] == ["v1.35.0"]
    assert len(doc["calibrations"][0]["clusters"]) == due
    assert not doc["compliant"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--at", "tomorrow"], "--at: expected an ISO 8601 time"),
        (["--at", "2026-12-05T03:00:00"], "--at: give a time zone"),
    ],
)
def test_check_bad_input(extra: list[str], message: str) -> None:
    argv = ["schedule", "check", "-p", str(REPO / "examples/policy.yaml")]
    result = runner.invoke(app, [*argv, "-s", str(REPO / "examples/fleet.yaml"), *extra])
    assert result.exit_code == 2
    assert message in result.stderr


def test_every_connection_option_is_a_flag() -> None:
    @connection_options
    def command(temporal: ConnectionFlags) -> ConnectionFlags:
        return temporal

    given = {name: object() for name in inspect.signature(command).parameters}
    got = command(**given)  # a flag without its field would not construct
    # ...and every field carries the value of its own flag: one flag per field.
    assert sorted(id(getattr(got, f.name)) for f in fields(got)) == sorted(map(id, given.values()))
