"""The Temporal workflows, one module each: deterministic code only (import-linter holds it).

``cluster_upgrade`` (one cluster), ``fleet_calibration`` (a fleet, stage by stage),
``continuous`` (policy-driven calibrations) and ``common`` (what they share);
``fleet_control``, ``fleet_waves`` and ``fleet_progress`` are ``fleet_calibration``'s parts
(operator requests, wave scheduling, the run's record). Nothing is imported here, so the
sandbox loads only the module of the workflow it runs.
"""
