"""Token cost from a versioned price table (`configs/prices.yaml`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from sv_dagster.core.artifacts.paths import CONFIGS_DIR
from sv_shared.errors import UserError


class PriceTableError(UserError, ValueError):
    """A price table that cannot be used; the message names the file."""


@dataclass(frozen=True)
class PriceTable:
    version: str
    currency: str
    per_million: dict[str, tuple[float, float]]
    """model id -> (input, output) price per 1M tokens."""

    def cost(self, model_id: str, usage: dict[str, int] | None) -> float | None:
        """Cost of one call, or None when the model has no price or usage is unknown."""
        price = self.per_million.get(model_id)
        if price is None or not usage:
            return None
        return (usage.get("prompt_tokens", 0) * price[0] + usage.get("completion_tokens", 0) * price[1]) / 1e6


def price_table_path() -> Path:
    return Path(os.environ.get("SV_PRICE_TABLE") or CONFIGS_DIR / "prices.yaml")


def load_price_table(path: Path | None = None) -> PriceTable:
    path = path or price_table_path()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PriceTableError(f"cannot read price table {path}: {exc}") from exc
    prices = {}
    for model, entry in (data.get("models") or {}).items():
        try:
            prices[str(model)] = (float(entry["input"]), float(entry["output"]))
        except (TypeError, KeyError, ValueError) as exc:
            raise PriceTableError(f"{path}: model {model!r} needs numeric 'input' and 'output' prices") from exc
    if not data.get("version"):
        raise PriceTableError(f"{path}: a price table needs a 'version'")
    return PriceTable(str(data["version"]), str(data.get("currency", "USD")), prices)
