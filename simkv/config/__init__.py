"""Configuration: frozen pydantic models validated once, at the edge."""

from simkv.config.base import Frozen, YamlDoc, load_yaml, parse_yaml, validate

__all__ = ["Frozen", "YamlDoc", "load_yaml", "parse_yaml", "validate"]
