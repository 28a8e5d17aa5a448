"""What the tests and the benchmarks share: fleet builders, stand-ins, harnesses and corpora.

One importable place, so that a benchmark never imports a test module and each builder exists
once. It is neither shipped nor imported by the product (an import-linter contract keeps
orchestrator, workflows and infra from it); tests and benchmarks import it, never the reverse.
"""
