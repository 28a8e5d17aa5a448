"""Pulumi stacks that provision a CAPI fleet from our ClusterClass (see docs/pulumi.md)."""
