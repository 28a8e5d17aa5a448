"""The ``calibrator`` command line: thin, lazy imports, ``-o table|json|yaml`` everywhere."""
