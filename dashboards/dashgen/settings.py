"""``dashboards/config.yaml``: thresholds, the alert selector, grouping labels, the runbook URL."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Settings:
    selector: str
    group_by: tuple[str, ...]
    runbook_base_url: str
    interval: str
    alerts: dict[str, dict[str, Any]]
    grafana_datasource_uid: str = "prometheus"

    @classmethod
    def load(cls, path: Path) -> Settings:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise SystemExit(f"{path}: expected a mapping")
        group_by = tuple(str(label) for label in raw.get("group_by") or ("job",))
        if not group_by:
            raise SystemExit(f"{path}: group_by must name at least one label")
        return cls(
            selector=str(raw.get("selector") or "").strip().strip("{}").strip(),
            group_by=group_by,
            runbook_base_url=str(raw["runbook_base_url"]),
            interval=str(raw.get("interval", "1m")),
            alerts={str(k): dict(v) for k, v in (raw.get("alerts") or {}).items()},
            grafana_datasource_uid=str(raw.get("grafana_datasource_uid", "prometheus")),
        )

    def alert(self, key: str) -> dict[str, Any]:
        try:
            return self.alerts[key]
        except KeyError:
            raise SystemExit(f"config: alerts.{key} is missing") from None
