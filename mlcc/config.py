"""mlcc.yaml: any compile option as a YAML mapping; command-line flags override it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from mlcc.compiler import CompileOptions

DEFAULT_FILE = "mlcc.yaml"


class ConfigError(ValueError):
    pass


def load_config(path: str | None) -> tuple[dict[str, Any], str | None]:
    """The options in path (or ./mlcc.yaml when it exists), with the file they came from."""
    if path is None:
        if not Path(DEFAULT_FILE).is_file():
            return {}, None
        path = DEFAULT_FILE
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of option names to values")
    fields = {f.name for f in dataclasses.fields(CompileOptions)} - {"config_file"}
    data = {k.replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigError(f"{path}: unknown option {', '.join(unknown)} (known: {', '.join(sorted(fields))})")
    if isinstance(data.get("targets"), str):
        data["targets"] = data["targets"].split(",")
    return data, str(p)


def merge_options(config: dict[str, Any], cli: dict[str, Any], config_file: str | None) -> CompileOptions:
    options = CompileOptions()
    for k, v in {**config, **{k: v for k, v in cli.items() if v is not None}}.items():
        setattr(options, k, v)
    options.config_file = config_file
    return options
