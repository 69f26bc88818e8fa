"""Attention backend selection: `No valid attention backend found`, `Selected backend ... is not valid`.

parse: the selector's message into a config and per-backend reasons; explain: the backends' needs
(the table) and the reasons in words; rules: the diagnoses built from both.
"""

from triage.rules.attention.parse import parse_config, parse_reasons
from triage.rules.attention.rules import RULES

__all__ = ["RULES", "parse_config", "parse_reasons"]
