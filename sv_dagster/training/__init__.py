"""Training: configs, SFT data, TRL stages, rewards, curricula and the safety review (plain Python)."""
