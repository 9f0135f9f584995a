"""Fast structural validation of plain (JSON-shaped) inputs and configs.

Scoring runs on plain dicts with the reference's camelCase keys: that keeps the algorithm a line-for-line
reading of the spec and keeps model construction out of the hot path. The checks here are compiled once from
the pydantic models' JSON Schema, so the models stay the single definition of what is valid. A checker:

* rejects wrong types with an error naming the field path (``candidates[2].combinedScore``);
* accepts snake_case names as well as camelCase, and ISO-8601 strings where a datetime is expected;
* drops ``None`` values of optional fields (``None`` means "not given", as ``undefined`` does in the reference);
* copies a container only when something in it had to change, so valid camelCase input is not copied at all.
"""

from __future__ import annotations

import datetime
import numbers
import types
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from ..errors import RagConfidenceError
from ._js import MAX_EXACT, as_double

Checker = Callable[[Any, str], Any]
_DROP = object()  # a checker's answer for "None given for an optional field"


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    kind = type(value)
    # numpy's bool prints as "bool": name its module, so the message does not read "expected a boolean, got a
    # bool".
    return f"a {kind.__name__}" if kind.__module__ == "builtins" else f"a {kind.__module__}.{kind.__name__}"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def parse_datetime(value: object) -> datetime.datetime | None:
    """A timezone-aware UTC datetime from a datetime or an ISO-8601 string; naive values are taken as UTC."""
    if isinstance(value, datetime.datetime):
        parsed = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.datetime.fromisoformat(text)
        except ValueError:
            return None
    else:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed


class _Compiler:
    def __init__(self, schema: Mapping[str, Any], error: type[RagConfidenceError], names: dict[str, str]):
        self._defs: Mapping[str, Any] = schema.get("$defs", {})
        self._error = error
        self._names = names  # snake_case -> camelCase, across all models
        self._cache: dict[str, Checker] = {}

    def fail(self, path: str, expected: str, value: object) -> RagConfidenceError:
        where = path or "value"
        return self._error(f"{where}: expected {expected}, got {_describe(value)}", path=path or None)

    def compile(self, node: Mapping[str, Any]) -> Checker:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name not in self._cache:
                # Placeholder first: schemas may be recursive.
                self._cache[name] = lambda v, p: self._cache[name](v, p)
                self._cache[name] = self.compile(self._defs[name])
            return self._cache[name]
        if "anyOf" in node:
            options = [option for option in node["anyOf"] if option.get("type") != "null"]
            nullable = len(options) < len(node["anyOf"])
            inner = self.compile(options[0]) if len(options) == 1 else self._union(options)
            if not nullable:
                return inner

            def optional(value: Any, path: str) -> Any:
                return _DROP if value is None else inner(value, path)

            return optional
        if "enum" in node or "const" in node:
            allowed = tuple(node.get("enum", [node.get("const")]))
            expected = ", ".join(repr(a) for a in allowed)

            def enum(value: Any, path: str) -> Any:
                if isinstance(value, str) and value in allowed:
                    return value
                raise self.fail(path, f"one of {expected}", value)

            return enum
        kind = node.get("type")
        if kind == "object":
            if "properties" in node:
                return self._object(node)
            return self._mapping(node)
        if kind == "array":
            return self._array(node)
        if kind == "number":
            return self._number
        if kind == "integer":
            return self._integer
        if kind == "boolean":
            return self._boolean
        if kind == "string":
            return self._datetime if node.get("format") == "date-time" else self._string
        return lambda value, path: value  # unconstrained

    def _union(self, options: list[Mapping[str, Any]]) -> Checker:
        checkers = [self.compile(option) for option in options]

        def union(value: Any, path: str) -> Any:
            for checker in checkers:
                try:
                    return checker(value, path)
                except RagConfidenceError:
                    continue
            raise self.fail(path, "a valid value", value)

        return union

    def _number(self, value: Any, path: str) -> Any:
        kind = type(value)
        if kind is float:
            return value
        if kind is int:
            # A number field holds a double, as in the reference: an int past 2**53 becomes the nearest one, and
            # one past the largest double Infinity (JSON text like 1e400 parses to that there), so the arithmetic
            # on it neither diverges nor raises OverflowError.
            return as_double(value)
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            # Scores straight out of numpy or a vector store (np.float32 is no float subclass), Fractions:
            # numbers to the reference's JSON, so numbers here.
            return float(value)
        raise self.fail(path, "a number", value)

    def _integer(self, value: Any, path: str) -> Any:
        if type(value) is int:
            return value
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)  # np.int64 and the like
        raise self.fail(path, "an integer", value)

    def _boolean(self, value: Any, path: str) -> Any:
        if value is True or value is False:
            return value
        raise self.fail(path, "a boolean", value)

    def _string(self, value: Any, path: str) -> Any:
        if isinstance(value, str):
            return value
        raise self.fail(path, "a string", value)

    def _datetime(self, value: Any, path: str) -> Any:
        if type(value) is datetime.datetime and value.tzinfo is not None:
            return value
        parsed = parse_datetime(value)
        if parsed is None:
            raise self.fail(path, "a datetime or an ISO-8601 string", value)
        return parsed

    def _array(self, node: Mapping[str, Any]) -> Checker:
        item = self.compile(node.get("items", {}))

        def array(value: Any, path: str) -> Any:
            if not isinstance(value, (list, tuple)):
                raise self.fail(path, "an array", value)
            out: list[Any] | None = None
            for index, element in enumerate(value):
                checked = item(element, f"{path}[{index}]")
                if checked is _DROP:
                    raise self.fail(f"{path}[{index}]", "a value", element)
                if checked is not element and out is None:
                    out = list(value[:index])
                if out is not None:
                    out.append(checked)
            if out is not None:
                return out
            return value if isinstance(value, list) else list(value)

        return array

    def _mapping(self, node: Mapping[str, Any]) -> Checker:
        extra = node.get("additionalProperties", True)
        item = self.compile(extra) if isinstance(extra, Mapping) else (lambda v, p: v)
        numbers = isinstance(extra, Mapping) and _scalar_kind(extra) == _NUM and "anyOf" not in extra

        def mapping(value: Any, path: str) -> Any:
            if not isinstance(value, Mapping):
                raise self.fail(path, "an object", value)
            if numbers and type(value) is dict:
                # The common case (method -> score): all plain floats and ints, nothing to copy.
                for element in value.values():
                    kind = type(element)
                    if kind is not float and (kind is not int or not -MAX_EXACT <= element <= MAX_EXACT):
                        break
                else:
                    for key in value:
                        if type(key) is not str:
                            raise self.fail(path, "an object with string keys", value)
                    return value
            out: dict[str, Any] | None = None
            for key, element in value.items():
                if not isinstance(key, str):
                    raise self.fail(path, "an object with string keys", value)
                checked = item(element, _join(path, key))
                if checked is _DROP:
                    raise self.fail(_join(path, key), "a value", element)
                if checked is not element and out is None:
                    out = {}
                    for done_key, done_value in value.items():
                        if done_key == key:
                            break
                        out[done_key] = done_value
                if out is not None:
                    out[key] = checked
            if out is not None:
                return out
            return value if type(value) is dict else dict(value)

        return mapping

    def _object(self, node: Mapping[str, Any]) -> Checker:
        # Scalars are checked inline by kind rather than through a checker call each: objects such as
        # candidates are validated once per field per candidate, and this is the hot edge of every score.
        kinds: dict[str, tuple[int, Checker]] = {}
        for key, sub in node["properties"].items():
            kinds[key] = (_scalar_kind(sub), self.compile(sub))
        required = tuple(node.get("required", ()))
        names = self._names
        closed = node.get("additionalProperties", True) is False
        fail = self.fail

        def obj(value: Any, path: str) -> Any:
            if type(value) is not dict:
                if isinstance(value, BaseModel):
                    value = value.model_dump(by_alias=True, exclude_none=True)
                elif isinstance(value, Mapping):
                    value = dict(value)
                else:
                    raise fail(path, "an object", value)
            out: dict[str, Any] | None = None
            for key, element in value.items():
                name = key
                entry = kinds.get(key)
                if entry is None:
                    name = names.get(key, key) if isinstance(key, str) else key
                    entry = kinds.get(name)
                    if entry is None:
                        if closed:
                            where = _join(path, str(key))
                            raise self._error(f"{where}: unknown field", path=where)
                        continue
                    if name in value:
                        where = _join(path, name)
                        raise self._error(f"{where}: given twice, as {name!r} and as {key!r}", path=where)
                kind = entry[0]
                element_type = type(element)
                if (
                    kind == _NUM
                    and (element_type is float or element_type is int and -MAX_EXACT <= element <= MAX_EXACT)
                    or kind == _STR
                    and element_type is str
                    or kind == _BOOL
                    and element_type is bool
                ):
                    checked = element
                else:
                    checked = entry[1](element, _join(path, name))
                if out is None and (checked is not element or name is not key):
                    out = {}
                    for done_key, done_value in value.items():
                        if done_key == key:
                            break
                        out[names.get(done_key, done_key)] = done_value
                if out is not None and checked is not _DROP:
                    out[name] = checked
            result = value if out is None else out
            for key in required:
                if key not in result:
                    where = _join(path, key)
                    raise self._error(f"{where}: field required", path=where)
            return result

        return obj


_NUM, _STR, _BOOL, _OTHER = 1, 2, 3, 0


def _scalar_kind(node: Mapping[str, Any]) -> int:
    """The inline-checkable kind of a property (optional scalars included), or _OTHER."""
    options = node.get("anyOf")
    if options is not None:
        concrete = [option for option in options if option.get("type") != "null"]
        if len(concrete) != 1:
            return _OTHER
        node = concrete[0]
    if "enum" in node or "const" in node or "$ref" in node or node.get("format"):
        return _OTHER
    return {"number": _NUM, "string": _STR, "boolean": _BOOL}.get(node.get("type", ""), _OTHER)


def _field_names(model: type[BaseModel], seen: dict[str, str]) -> dict[str, str]:
    for name, field in model.model_fields.items():
        if field.alias and field.alias != name:
            seen[name] = field.alias
        for candidate in _nested_models(field.annotation):
            if candidate not in _visited:
                _visited.add(candidate)
                _field_names(candidate, seen)
    return seen


_visited: set[type[BaseModel]] = set()


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    # Python 3.10: isinstance(list[X], type) is True and issubclass(list[X], ...) raises TypeError.
    if (
        isinstance(annotation, type)
        and not isinstance(annotation, types.GenericAlias)
        and issubclass(annotation, BaseModel)
    ):
        found.append(annotation)
    for argument in getattr(annotation, "__args__", ()) or ():
        found.extend(_nested_models(argument))
    return found


def compile_model(model: type[BaseModel], error: type[RagConfidenceError]) -> Checker:
    """Build the checker for plain data in ``model``'s shape; it raises ``error`` naming the field path."""
    _visited.clear()
    names = _field_names(model, {})
    schema = model.model_json_schema(by_alias=True)
    return _Compiler(schema, error, names).compile(schema)
