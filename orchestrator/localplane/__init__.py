"""Process-based CAPI management plane: etcd + kube-apiserver + the four CAPI managers.

The same software kind + CAPD would run, started as local processes on 127.0.0.1 so that the
integration tests and the README's main job use real Cluster API controllers on a machine
without a Docker engine.
"""
