"""Dashboard JSON and Grafana provisioning: the structure Grafana needs to load them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import DEPLOY
from .promql import variables_used

DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
#: set by Grafana itself, not by the dashboard's templating
GRAFANA_BUILTINS = {
    "__all",
    "__rate_interval",
    "__interval",
    "__range",
    "__range_s",
    "__dashboard",
    "__from",
    "__to",
}


def _provisioned_uids() -> set[str]:
    uids = set()
    for path in (DEPLOY / "grafana" / "provisioning" / "datasources").glob("*.yml"):
        uids |= {source["uid"] for source in yaml.safe_load(path.read_text())["datasources"]}
    return uids


def _datasource_refs(node: Any) -> list[Any]:
    if isinstance(node, dict):
        found = [node["datasource"]] if "datasource" in node else []
        return found + [ref for value in node.values() for ref in _datasource_refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _datasource_refs(value)]
    return []


def test_the_four_dashboards_exist_with_unique_uids() -> None:
    uids = [json.loads(p.read_text())["uid"] for p in DASHBOARDS]
    assert len(DASHBOARDS) == 4 and len(set(uids)) == 4


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_dashboard_structure(path: Path) -> None:
    dashboard = json.loads(path.read_text())
    assert dashboard["title"] and dashboard["uid"] and dashboard["schemaVersion"] >= 36
    panels = dashboard["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {path.name}"
    for panel in panels:
        assert panel["title"] and panel["type"] and panel["targets"], panel
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        assert [t["refId"] for t in panel["targets"]] == sorted({t["refId"] for t in panel["targets"]})
    uids = _provisioned_uids()
    for ref in _datasource_refs(dashboard):
        assert isinstance(ref, dict) and ref.get("type") == "prometheus" and ref.get("uid") in uids, ref
    defined = {variable["name"] for variable in dashboard["templating"]["list"]}
    text = json.dumps({"panels": panels, "templating": dashboard["templating"]})
    assert variables_used(text) - GRAFANA_BUILTINS <= defined


def test_provisioning_points_at_the_dashboards() -> None:
    (provider,) = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/farm.yml").read_text())[
        "providers"
    ]
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    grafana_volumes = compose["services"]["grafana"]["volumes"]
    assert any(v.split(":")[1] == provider["options"]["path"] for v in grafana_volumes), grafana_volumes
