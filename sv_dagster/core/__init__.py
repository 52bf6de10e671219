"""Plain Python behind the assets: provenance, model backends, the eval runner, data
curation. Nothing here imports Dagster, so all of it is tested without it."""
