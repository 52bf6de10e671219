"""Data: corpora and curated datasets, the synthetic pipeline, and the validation suites."""
