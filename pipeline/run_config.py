"""A run's configuration (model, parallel config and mapping, platform) and where it came from.

Sources, in priority order: ``--config FILE.toml`` given to ``derive``; a config recorded at
ingest (``--config`` to ``ingest``, or a ``manifest.json`` found beside the logs, written by the
generator, the collection helper or the sample recorder); otherwise none, and the marts infer
what they can from the communicators. The chosen configuration is stored with the run
(``<store>/runs/<run_id>/config.json``) and shown in reports.

Every config is validated (:mod:`commscope.pipeline.config_schema`) where it is read, before anything is
written: a bad one, an unknown section or key included, is one
:class:`~commscope.pipeline.config_schema.ConfigError` naming the file, the section and the key. One file
serves every command: the generator's ``[generate]``/``[scenario]`` are checked here too and
left out of what is stored. A manifest is read under the symlink and file-type policy of :mod:`commscope.pipeline.fs_policy`. A
stored config that no longer validates (written by an older commscope) is ignored with one
warning, so ``derive`` and ``report`` still run.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commscope.pipeline.config_schema import (
    MAX_CONFIG_BYTES,
    Checked,
    ConfigError,
    load_config_bytes,
    validate,
)
from commscope.pipeline.fs_policy import not_regular, read_checked
from commscope.pipeline.model_inputs import StoredConfig
from commscope.pipeline.store import Store, validate_run_id

if TYPE_CHECKING:
    from commscope.model.config import RunConfig
    from commscope.synthetic.scenario import GenerateOptions

log = logging.getLogger(__name__)

MANIFEST_NAME = "manifest.json"


def read_config_file(path: Path) -> dict[str, Any]:
    """Read and validate a TOML (or JSON) config file; return the model's sections.

    Raises:
        ConfigError: unreadable, not a regular file, not TOML/JSON, an unknown section or
            key, or a key of the wrong type or out of range (the message names the file and
            the key).
    """
    return check_config_file(path).config


def check_config_file(path: Path) -> Checked:
    """Read and validate a config file: the model's sections and the generator's.

    Raises:
        ConfigError: as :func:`read_config_file`.
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    problem = not_regular(mode)
    if problem is not None:  # never open a FIFO or a device for reading
        raise ConfigError(f"{path}: {problem}")
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    data = load_config_bytes(raw, str(path), json_format=path.suffix == ".json")
    return validate(data, str(path))


def read_manifest(folder: Path) -> tuple[dict[str, Any], bool] | None:
    """The validated ``config`` section and synthetic flag of ``folder/manifest.json``, if any.

    The manifest is read under :mod:`commscope.pipeline.fs_policy` with ``folder`` as the walked tree:
    a manifest symlinked from outside ``folder``, or one that is not a regular file, is not
    read (a warning says why) and the result is None, as for a manifest without a config.

    Raises:
        ConfigError: the manifest is not JSON, not an object, or its config is invalid.
    """
    path = folder / MANIFEST_NAME
    raw = read_checked(path, folder, MAX_CONFIG_BYTES)
    if raw is None:
        return None
    if isinstance(raw, str):
        log.warning("%s: %s", path, raw)
        return None
    data = load_config_bytes(raw, str(path), json_format=True)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    if "config" not in data:
        return None
    cfg = validate(data["config"], f"{path}: config").config
    synthetic = data.get("synthetic", False)
    if not isinstance(synthetic, bool):
        raise ConfigError(f"{path}: synthetic: expected true or false, got {synthetic!r:.40}")
    return cfg, synthetic


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
    """A run's stored configuration, or None (also for one that no longer validates).

    A stored config that is unreadable or invalid (a store written by an older commscope,
    or edited by hand) is ignored with one warning naming the file, so ``derive`` and
    ``report`` run as for a run without a config.
    """
    path = config_path(store, run_id)
    try:
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        data = load_config_bytes(raw, str(path), json_format=True)
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
        source, synthetic = data.get("source"), data.get("synthetic", False)
        if not isinstance(source, str) or not isinstance(synthetic, bool):
            raise ConfigError(f"{path}: source or synthetic missing or of the wrong type")
        checked = validate(data.get("config"), f"{path}: config")
    except (ConfigError, OSError) as exc:
        log.warning("stored config ignored (re-derive with --config to replace it): %s", exc)
        return None
    return StoredConfig(run_id, checked.config, source, synthetic)


def from_inputs(run_id: str, paths: list[Path]) -> StoredConfig | None:
    """The config of the first manifest found in the given input folders (or files' folders).

    Reads and validates only; nothing is written, so ingest calls it before it commits.

    Raises:
        ConfigError: the first manifest found is invalid.
    """
    for p in paths:
        folder = p if p.is_dir() else p.parent
        found = read_manifest(folder)
        if found is not None:
            cfg, synthetic = found
            return StoredConfig(
                run_id, cfg, f"manifest:{(folder / MANIFEST_NAME).resolve()}", synthetic
            )
    return None


def from_file(run_id: str, path: Path) -> StoredConfig:
    """A run's config from a ``--config`` file, validated (raises ConfigError)."""
    return StoredConfig(run_id, read_config_file(path), f"config:{path.resolve()}")


def record_from_inputs(store: Store, run_id: str, paths: list[Path]) -> StoredConfig | None:
    """Record the config of the first manifest found in the given input folders (or files' folders).

    Raises:
        ConfigError: that manifest is invalid (nothing is recorded).
    """
    stored = from_inputs(run_id, paths)
    if stored is not None:
        save(store, stored)
    return stored


def load_generate_config(path: str | Path) -> tuple[RunConfig, GenerateOptions]:
    """Read a generator config (model sections + ``[generate]`` + ``[scenario]``) from TOML.

    The file is read and checked as every command reads it
    (:func:`check_config_file`): an unknown section or key, or a bad value,
    is one :class:`~commscope.pipeline.config_schema.ConfigError` naming the file and the key.

    Raises:
        ConfigError: (a ``ValueError``) unreadable, not TOML, or invalid content.
    """
    from commscope.synthetic.scenario import split_config

    checked = check_config_file(Path(path))
    return split_config({**checked.config, **checked.generator})
