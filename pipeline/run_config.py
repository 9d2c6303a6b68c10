"""A run's configuration (model, parallel config and mapping, platform) and where it came from.

Sources, in priority order: ``--config FILE.toml`` given to ``derive``; a config recorded at
ingest (``--config`` to ``ingest``, or a ``manifest.json`` found beside the logs, written by the
generator, the collection helper or the sample recorder); otherwise none, and the marts infer
what they can from the communicators. The chosen configuration is stored with the run
(``<store>/runs/<run_id>/config.json``) and shown in reports.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.store import Store, validate_run_id

MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class StoredConfig:
    """A run's configuration as stored."""

    run_id: str
    config: dict[str, Any]
    source: str
    synthetic: bool = False

    def to_json(self) -> str:
        """Serialise for the store."""
        return json.dumps(
            {
                "run_id": self.run_id,
                "source": self.source,
                "synthetic": self.synthetic,
                "config": self.config,
            },
            indent=2,
            sort_keys=True,
        )


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a TOML (or JSON) config file in the model's layout into a plain dict."""
    text = path.read_bytes()
    if path.suffix == ".json":
        return dict(json.loads(text))
    return tomllib.loads(text.decode())


def read_manifest(folder: Path) -> tuple[dict[str, Any], bool] | None:
    """The ``config`` section and synthetic flag of ``folder/manifest.json``, if any."""
    path = folder / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    cfg = data.get("config")
    if not isinstance(cfg, dict):
        return None
    return cfg, bool(data.get("synthetic", False))


def config_path(store: Store, run_id: str) -> Path:
    """Where a run's configuration is stored."""
    return store.root / "runs" / validate_run_id(run_id) / "config.json"


def save(store: Store, stored: StoredConfig) -> None:
    """Store a run's configuration (atomically)."""
    dest = config_path(store, stored.run_id)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    tmp.write_text(stored.to_json())
    tmp.replace(dest)


def load(store: Store, run_id: str) -> StoredConfig | None:
    """A run's stored configuration, or None."""
    path = config_path(store, run_id)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return StoredConfig(run_id, data["config"], data["source"], bool(data.get("synthetic")))


def record_from_inputs(store: Store, run_id: str, paths: list[Path]) -> StoredConfig | None:
    """Record the config of the first manifest found in the given input folders (or files' folders)."""
    for p in paths:
        folder = p if p.is_dir() else p.parent
        found = read_manifest(folder)
        if found is not None:
            cfg, synthetic = found
            stored = StoredConfig(
                run_id, cfg, f"manifest:{(folder / MANIFEST_NAME).resolve()}", synthetic
            )
            save(store, stored)
            return stored
    return None
