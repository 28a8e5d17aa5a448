"""The ``FleetBackend`` port (``port``) and its Kubernetes implementation, split by concern.

``fleet.KubeFleetBackend`` composes the parts; each part holds one concern of the management
plane: ``inventory`` (the fleet from LIST calls), ``rollout`` (observing one cluster's rollout),
``versions`` (topology and version patches), ``taints``, ``placement`` (PlacementDecision writes)
and ``blobs`` (content-addressed documents); ``access`` is what they share (the client, reads,
patches, hooks, the thread each call runs in). Nothing is imported here, so importing the pure
``port`` never loads the Kubernetes client.
"""
