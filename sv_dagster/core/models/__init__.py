"""Models: the registry, the backends that turn messages into completions (rule baselines, OpenAI-compatible endpoints, local checkpoints), rate limits, prices and the response cache."""
