"""``calibrator schedule`` timetables through the CLI on the real Temporal dev server.

"Every Saturday 02:00 Europe/Berlin, never two at once, skip if missed by more than an hour":
created, described (the server's own next run times, read back in Berlin time), updated,
paused and unpaused with a note. Bad changes are refused with one line and leave the schedule
as it was. No worker is needed: the schedule stays paused and nothing is triggered, so the
assertions read only what the server stored and computed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from typer.testing import CliRunner

from orchestrator.cli.main import app
from testkit.workflow_harness import start_dev_server

runner = CliRunner()
BERLIN = ZoneInfo("Europe/Berlin")


def _local(times: list[str]) -> list[datetime]:
    return [datetime.fromisoformat(t).astimezone(BERLIN) for t in times]


def test_a_weekly_berlin_schedule_is_created_updated_and_paused_through_the_cli(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("kind: CalibrationPolicy\nrules: {channel: stable}\n")
    other = tmp_path / "other.yaml"
    other.write_text("kind: CalibrationPolicy\nrules: {maxMinorsBehind: 1}\n")
    config = tmp_path / "temporal.toml"

    async def main() -> None:
        env = await start_dev_server()
        try:
            address = env.client.service_client.config.target_host
            config.write_text(f'[profile.dev]\naddress = "{address}"\n')
            cli_env = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "dev"}

            async def cli(*argv: str) -> Any:
                return await asyncio.to_thread(runner.invoke, app, list(argv), env=cli_env)

            async def described() -> Any:
                shown = await cli("schedule", "describe", "weekly", "-o", "json")
                assert shown.exit_code == 0, shown.output
                return json.loads(shown.stdout)

            created = await cli(
                "schedule", "create", "weekly", "--policy", str(policy),
                "--cron", "0 2 * * Sat", "--time-zone", "Europe/Berlin",
                "--jitter", "5m", "--catchup-window", "1h", "--paused", "-o", "json",
            )  # fmt: skip
            assert created.exit_code == 0, created.output
            doc = json.loads(created.stdout)
            assert (doc["spec"], doc["timeZone"], doc["jitter"], doc["catchupWindow"]) == (
                "cron 0 2 * * Sat", "Europe/Berlin", "5m", "1h",
            )  # fmt: skip
            assert (doc["overlap"], doc["paused"]) == ("SKIP", True)
            # The server's next runs: Saturdays, 02:00-02:05 Berlin time whatever the season.
            runs = _local(doc["nextRuns"])
            assert len(runs) == 5
            for run in runs:
                assert run.strftime("%a") == "Sat" and run.hour == 2 and run.minute < 5, run
            assert all(b - a >= timedelta(days=6) for a, b in itertools.pairwise(runs))

            listed = await cli("schedule", "list", "-o", "json")  # visibility: may trail a moment
            assert listed.exit_code == 0, listed.output
            for row in json.loads(listed.stdout)["schedules"]:
                assert (row["name"], row["spec"], row["timeZone"]) == (
                    "weekly", "cron 0 2 * * Sat", "Europe/Berlin",
                )  # fmt: skip

            # Update the timetable (the zone is kept), the jitter off, the note.
            updated = await cli(
                "schedule", "update", "weekly", "--cron", "30 3 * * Sun", "--jitter", "0",
                "--note", "moved to Sunday", "-o", "json",
            )  # fmt: skip
            assert updated.exit_code == 0, updated.output
            doc = await described()
            assert (doc["spec"], doc["timeZone"], doc["jitter"], doc["catchupWindow"]) == (
                "cron 30 3 * * Sun", "Europe/Berlin", "0s", "1h",
            )  # fmt: skip
            assert (doc["note"], doc["paused"], doc["policy"]) == (
                "moved to Sunday", True, "channel stable",
            )  # fmt: skip
            for run in _local(doc["nextRuns"]):
                assert (run.strftime("%a"), run.hour, run.minute, run.second) == ("Sun", 3, 30, 0)

            # A new policy; the timetable stays.
            repoliced = await cli("schedule", "update", "weekly", "--policy", str(other))
            assert repoliced.exit_code == 0, repoliced.output
            doc = await described()
            assert (doc["policy"], doc["spec"]) == (
                "within 1 minor(s) of newest",
                "cron 30 3 * * Sun",
            )

            # Bad changes: one line, exit 2, nothing changed on the server.
            before = await described()
            for argv, message in (
                (("--every", "1h", "--jitter", "2h"), "--jitter 2h must be shorter than"),
                (("--time-zone", "Mars/Olympus"), "unknown time zone 'Mars/Olympus'"),
                (("--cron", "0 2 * * Caturday"), "--cron: day of week 'Caturday'"),
            ):
                refused = await cli("schedule", "update", "weekly", *argv)
                assert refused.exit_code == 2, refused.output
                assert refused.stderr.startswith("error: ") and message in refused.stderr
                assert len(refused.stderr.strip().splitlines()) == 1
            assert await described() == before
            missing = await cli("schedule", "update", "nope", "--jitter", "1m")
            assert missing.exit_code == 2
            assert missing.stderr.strip() == "error: schedule nope not found"

            # Pause and unpause with a note (--reason is the older spelling of --note).
            for argv, paused, note in (
                (("unpause", "weekly", "--note", "release done"), False, "release done"),
                (("pause", "weekly", "--reason", "freeze until 2027"), True, "freeze until 2027"),
            ):
                done = await cli("schedule", *argv, "-o", "json")
                assert done.exit_code == 0, done.output
                assert json.loads(done.stdout) == {"name": "weekly", "paused": paused, "note": note}
                doc = await described()
                assert (doc["paused"], doc["note"]) == (paused, note)

            deleted = await cli("schedule", "delete", "weekly")
            assert deleted.exit_code == 0, deleted.output
        finally:
            await env.shutdown()

    asyncio.run(main())
