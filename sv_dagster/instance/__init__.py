"""The Dagster layer's reads and writes of the instance outside asset bodies: lineage walks
(from an asset, a run, a data version or a report row) and the records of synthetic batches
and their review decisions. The plain core below never imports Dagster; this package does."""

DATA_VERSION_TAG = "dagster/data_version"
"""The tag of a materialization's event that holds its data version (the content hash we set)."""
INPUT_DATA_VERSION_TAG = "dagster/input_data_version/"
"""Prefix of the tags that hold the data version of each input a materialization read."""
