"""The public scoring functions: validate at the edge, score plain data, return models."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigValidationError, InputValidationError
from ._build import scorecard_model
from ._plain import compile_model, parse_datetime
from .models import ConfidenceScorecard, ScoringConfig, ScoringInputs
from .scorer import DEFAULT_PREPARED, PreparedConfig, prepare_config, score_plain
from .validation import validate_config

InputsLike = ScoringInputs | Mapping[str, Any]
ConfigLike = ScoringConfig | Mapping[str, Any] | None

_check_inputs = compile_model(ScoringInputs, InputValidationError)
_check_config = compile_model(ScoringConfig, ConfigValidationError)


def plain_inputs(inputs: InputsLike) -> dict[str, Any]:
    """Validated inputs as a camelCase dict (the input itself when it needed no change)."""
    return _check_inputs(inputs, "")  # type: ignore[no-any-return]


def plain_config(config: ConfigLike) -> dict[str, Any]:
    """A structurally and semantically validated camelCase config dict."""
    if config is None:
        return {}
    plain: dict[str, Any] = _check_config(config, "")
    validate_config(plain)
    return plain


def compute_confidence(inputs: InputsLike, config: ConfigLike = None) -> ConfidenceScorecard:
    """Score one answer.

    ``inputs`` and ``config`` are models or plain dicts in the reference's camelCase shape (snake_case keys
    and ISO-8601 date strings are accepted too).

    >>> card = compute_confidence({
    ...     "supportLevel": "high",
    ...     "hasConflict": False,
    ...     "candidates": [
    ...         {"retrievalScores": {"semantic": 0.88, "keyword": 0.72}, "combinedScore": 0.88, "documentId": "a"},
    ...         {"retrievalScores": {"semantic": 0.80, "keyword": 0.70}, "combinedScore": 0.80, "documentId": "b"},
    ...     ],
    ... })
    >>> card.total, card.label, card.recommended_action
    (94, 'Strong', 'answer')

    Raises :class:`~rag_confidence.errors.ConfigValidationError` for an invalid config (always) and
    :class:`~rag_confidence.errors.InputValidationError` for wrongly typed inputs, or for any input warning
    when ``validation`` is ``"strict"``.
    """
    return scorecard_model(score_plain(plain_inputs(inputs), _prepared(config)))


class _SameNumber:
    """A number in a config snapshot that equals only a number of the very same type.

    ``True == 1 == 1.0`` in Python, but the validator tells them apart (a bool is not a number here, nor a
    number a bool), so a snapshot must too. Leaving the comparison to ``dict.__eq__`` and putting this on its
    left keeps a cache hit as fast as a plain equality test: only the numeric leaves pay a Python call.
    """

    __slots__ = ("kind", "value")

    def __init__(self, value: bool | int | float) -> None:
        self.kind = type(value)
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is self.kind and other == self.value

    __hash__ = None  # type: ignore[assignment]


class _Uncacheable(Exception):
    """A config holding something :func:`_snapshot` cannot copy faithfully (a model, a non-dict mapping)."""


def _snapshot(value: Any) -> Any:
    """A copy of a validated config for :func:`_prepared` to compare with; equal only to a type-exact copy.

    Containers are copied and numbers wrapped; strings, ``None`` and datetimes are immutable and kept. Anything
    else a valid config may hold (a nested model or mapping) could change in place unseen, so such a config is
    not cached at all.
    """
    kind = type(value)
    if kind is dict:
        return {key: _snapshot(item) for key, item in value.items()}
    if kind is list:
        return [_snapshot(item) for item in value]
    if kind is tuple:
        return tuple(_snapshot(item) for item in value)
    if isinstance(value, (bool, int, float)):
        return _SameNumber(value)
    if value is None or kind is str or kind is datetime.datetime:
        return value
    raise _Uncacheable


_PREPARED_CACHE: dict[int, tuple[dict[str, Any], PreparedConfig]] = {}
_PREPARED_CACHE_SIZE = 256


def _prepared(config: ConfigLike) -> PreparedConfig:
    """The prepared form of a config, reusing earlier work for the same plain-dict config.

    Callers commonly pass the same config dict on every call; validating and resolving it each time would cost
    more than scoring. The cache is keyed by the dict's identity and checked against a snapshot taken when it
    was prepared, equal only to a config with the same values of the same types (``1``, ``1.0`` and ``True``
    differ), so a dict changed in place (or a new dict at a recycled address) is validated and prepared afresh.
    Configs holding NaN never compare equal and are simply not reused. Other config types (models, mappings),
    and dicts holding them, are prepared on every call.
    """
    if config is None:
        return DEFAULT_PREPARED
    if type(config) is not dict:
        return prepare_config(plain_config(config))
    key = id(config)
    entry = _PREPARED_CACHE.get(key)
    # The snapshot must be the left operand: its numbers' __eq__ is the one that checks types.
    if entry is not None and entry[0] == config:
        return entry[1]
    prepared = prepare_config(plain_config(config))
    try:
        snapshot = _snapshot(config)
    except _Uncacheable:
        _PREPARED_CACHE.pop(key, None)
        return prepared
    if len(_PREPARED_CACHE) >= _PREPARED_CACHE_SIZE:
        _PREPARED_CACHE.clear()
    _PREPARED_CACHE[key] = (snapshot, prepared)
    return prepared


class Scorer:
    """A scorer bound to one validated config; see :func:`create_scorer`. Safe to share between threads.

    >>> scorer = create_scorer({"preset": "balanced-v0.3"})
    >>> card = scorer.compute({"supportLevel": "low", "hasConflict": True, "candidates": []})
    >>> card.recommended_action
    'abstain'
    >>> scorer.compute_plain({"supportLevel": "low", "hasConflict": True, "candidates": []})["recommendedAction"]
    'abstain'
    """

    __slots__ = ("_prepared", "config")

    def __init__(self, config: ConfigLike) -> None:
        plain = plain_config(config)
        self._prepared: PreparedConfig = prepare_config(plain)
        self.config: ScoringConfig = ScoringConfig.model_validate(plain)

    def compute(self, inputs: InputsLike) -> ConfidenceScorecard:
        """Score one answer with the bound config."""
        return scorecard_model(score_plain(plain_inputs(inputs), self._prepared))

    def compute_plain(self, inputs: InputsLike) -> dict[str, Any]:
        """Like :meth:`compute`, but the scorecard as a plain dict in the reference's JSON shape."""
        return score_plain(plain_inputs(inputs), self._prepared)

    def _compute_extracted(self, inputs: dict[str, Any]) -> ConfidenceScorecard:
        """:meth:`compute` for the inputs signal extraction builds, without validating them again.

        They are valid camelCase by construction but for one thing validation changes: candidate timestamps
        are ISO strings, turned into datetimes here with the validator's own parser (the signal fuzz tests
        hold the result equal to what validation makes). Validation is a third of scoring a small answer.
        Anything else must go through :meth:`compute`.
        """
        return scorecard_model(score_plain(extracted_inputs(inputs), self._prepared))


def extracted_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """What validating signal extraction's output yields: its candidates' ``lastUpdated`` strings as datetimes
    (the one date-time field of the inputs). A timestamp the parser refuses sends the whole input through full
    validation, which raises as it always would."""
    candidates = inputs.get("candidates")
    if not candidates:
        return inputs
    converted: list[Any] | None = None
    for index, candidate in enumerate(candidates):
        value = candidate.get("lastUpdated")
        if value is None or (type(value) is datetime.datetime and value.tzinfo is not None):
            continue
        parsed = parse_datetime(value)
        if parsed is None:
            return plain_inputs(inputs)
        if converted is None:
            converted = list(candidates)
        converted[index] = {**candidate, "lastUpdated": parsed}
    if converted is None:
        return inputs
    return {**inputs, "candidates": converted}


def create_scorer(config: ConfigLike = None) -> Scorer:
    """Validate ``config`` once and return an object whose ``.compute(inputs)`` scores with it.

    >>> scorer = create_scorer({"preset": "production-v0.3", "relevance": {"required": True}})
    >>> scorer.compute({"supportLevel": "low", "candidates": []}).recommended_action
    'abstain'
    """
    return Scorer(config)
