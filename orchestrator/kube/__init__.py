"""Adapters to Kubernetes and Cluster API: the only package that imports ``kubernetes``."""
