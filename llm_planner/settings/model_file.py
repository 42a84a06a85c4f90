"""Reading a YAML file into a pydantic model: the one way every settings, skill, execution-model,
profile and preset file is loaded, so that each problem is reported the same way, naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError


class ConfigError(ValueError):
    """A settings or data file that cannot be used, and why."""


Model = TypeVar("Model", bound=BaseModel)


def load_model_file(model: type[Model], path: Path, what: str, overrides: dict[str, Any] | None = None) -> Model:
    """`what` names the kind of file in the error ("fleet file"). `overrides` replace top-level
    keys of the file (None values are left out)."""
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {exc}") from None
    if overrides:
        raw = (raw or {}) | {k: v for k, v in overrides.items() if v is not None}
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        raise ConfigError(f"invalid {what} {path}:\n{exc}") from None
