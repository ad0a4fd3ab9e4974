"""End-to-end tests on the real local control plane (scripts/local-cluster)."""
