"""Artifacts: where outputs live (paths, the fsspec store), provenance records and hashes, redaction, and YAML config reading."""
