"""Fleet Calibrator: converge Kubernetes version drift across a Cluster API fleet."""
