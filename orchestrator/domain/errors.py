"""The one error family that user input can raise.

The CLI turns any ``InputError`` into a single stderr line and exit code 2, and workflows turn it
into a non-retryable failure, so every message must stand alone and name the offending value.
"""


class InputError(ValueError):
    """Invalid user input: a version, a snapshot, a strategy, a target."""
