"""Entry point for ``pulumi up`` run inside infra/ (the CLI uses the same program inline)."""

from infra.program import main

main()
