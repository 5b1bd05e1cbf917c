"""One way to validate parameters, shared by ``collector``, ``landscape`` and ``viz``.

Modelled on scikit-learn's ``_param_validation``: a callable declares constraints per
parameter, one validator checks them, and every message has the same shape::

    The 'max_file_size' parameter of SummaryRecord must be an int in the range
    [0, inf) or None. Got -1 instead.

Errors are :class:`InvalidParameterError`, a subclass of both ``ValueError`` and
``TypeError`` so callers may catch either (MindSpore documents TypeError for wrong
types and ValueError for wrong values; both work).
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "InvalidParameterError",
    "Interval",
    "Options",
    "InstanceOf",
    "Predicate",
    "Constraint",
    "validate_params",
    "check_param",
    "InvalidDirectoryError",
    "check_directory",
]


class InvalidParameterError(ValueError, TypeError):
    """A parameter has an invalid type or value (subclass of ValueError and TypeError)."""


class InvalidDirectoryError(InvalidParameterError, NotADirectoryError):
    """A parameter that must name a folder names a file, or a folder inside a file.

    A subclass of :class:`InvalidParameterError` (ValueError, TypeError) and of
    ``NotADirectoryError`` (OSError): code that caught the ``OSError`` that creating
    the folder used to raise still catches it.
    """


class Constraint:
    """Base of all constraints: ``is_satisfied_by`` and a human description."""

    def is_satisfied_by(self, value: Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def __str__(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


class Interval(Constraint):
    """A number of ``kind`` (int or float) in ``[left, right]`` (``closed`` says which ends).

    ``bool`` is never accepted as an int: ``True`` as a step or a size is a bug.
    """

    def __init__(self, kind: type, left: float | None, right: float | None, closed: str = "both") -> None:
        if kind not in (int, float):
            raise ValueError("Interval kind must be int or float")
        self.kind, self.left, self.right, self.closed = kind, left, right, closed

    def _type_ok(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if self.kind is int:
            return isinstance(value, numbers.Integral)
        return isinstance(value, numbers.Real)

    def is_satisfied_by(self, value: Any) -> bool:
        if not self._type_ok(value):
            return False
        if self.kind is float and math.isnan(value):
            return False
        lo_closed = self.closed in ("both", "left")
        hi_closed = self.closed in ("both", "right")
        if self.left is not None and (value < self.left or (value == self.left and not lo_closed)):
            return False
        return self.right is None or not (value > self.right or (value == self.right and not hi_closed))

    def __str__(self) -> str:
        lo = "-inf" if self.left is None else str(self.left)
        hi = "inf" if self.right is None else str(self.right)
        lb = "[" if self.closed in ("both", "left") and self.left is not None else "("
        rb = "]" if self.closed in ("both", "right") and self.right is not None else ")"
        name = "an int" if self.kind is int else "a float"
        return f"{name} in the range {lb}{lo}, {hi}{rb}"


class Options(Constraint):
    """One of a fixed set of values (compared with ``==``, types checked too)."""

    def __init__(self, options: Iterable[Any]) -> None:
        self.options = tuple(options)

    def is_satisfied_by(self, value: Any) -> bool:
        return any(type(value) is type(o) and value == o for o in self.options)

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)


class InstanceOf(Constraint):
    """An instance of one of ``types``; ``description`` overrides the text."""

    def __init__(self, *types: type, description: str | None = None) -> None:
        self.types = types
        self.description = description

    def is_satisfied_by(self, value: Any) -> bool:
        if bool not in self.types and isinstance(value, bool) and not any(t in (bool, object) for t in self.types):
            return False
        return isinstance(value, self.types)

    def __str__(self) -> str:
        if self.description:
            return self.description
        names = [t.__name__ for t in self.types]
        if len(names) > 1:
            return "an instance of " + " or ".join(repr(n) for n in names)
        return f"an instance of {names[0]!r}"


class Predicate(Constraint):
    """Any check with its own description, e.g. ``Predicate(os.path.isdir, "an existing directory")``."""

    def __init__(self, func: Callable[[Any], bool], description: str) -> None:
        self.func, self.description = func, description

    def is_satisfied_by(self, value: Any) -> bool:
        try:
            return bool(self.func(value))
        except Exception:
            return False

    def __str__(self) -> str:
        return self.description


def _to_constraint(c: Any) -> Constraint:
    if isinstance(c, Constraint):
        return c
    if c is None:
        return Predicate(lambda v: v is None, "None")
    if c == "nonempty_str":
        return Predicate(lambda v: isinstance(v, str) and len(v) > 0, "a non-empty str")
    if c == "path":
        return Predicate(lambda v: isinstance(v, (str, os.PathLike)), "a str or os.PathLike path")
    if c == "int":
        return Predicate(lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool), "an int")
    if c == "boolean":
        return Predicate(lambda v: isinstance(v, bool), "a bool")
    if c == "callable":
        return Predicate(callable, "a callable")
    if isinstance(c, type):
        return InstanceOf(c)
    raise TypeError(f"unknown constraint {c!r}")


def _describe(constraints: list[Constraint]) -> str:
    texts = [str(c) for c in constraints]
    if len(texts) == 1:
        return texts[0]
    return ", ".join(texts[:-1]) + " or " + texts[-1]


def check_param(
    name: str,
    value: Any,
    constraints: list[Any],
    *,
    caller: str,
    hint: str | None = None,
) -> Any:
    """Check one value against a list of alternative constraints; return it unchanged.

    Parameters
    ----------
    name : str
        The parameter's name as the user wrote it (``"max_file_size"``,
        ``"collect_landscape['unit']"``).
    value : object
        What the user passed.
    constraints : list
        Alternatives; the value is valid if any one holds. Items are
        :class:`Constraint` objects, ``None``, a type, or one of the strings
        ``"nonempty_str"``, ``"path"``, ``"int"``, ``"boolean"``, ``"callable"``.
    caller : str
        What the parameter belongs to (``"SummaryRecord"``).
    hint : str, optional
        Appended to the message as ``HINT: ...``.

    Raises
    ------
    InvalidParameterError
        With the message "The 'name' parameter of caller must be ... Got ... instead."
    """
    cons = [_to_constraint(c) for c in constraints]
    if any(c.is_satisfied_by(value) for c in cons):
        return value
    shown = repr(value)
    if len(shown) > 200:
        shown = shown[:197] + "..."
    msg = f"The '{name}' parameter of {caller} must be {_describe(cons)}. Got {shown} instead."
    if hint:
        msg += f" HINT: {hint}"
    raise InvalidParameterError(msg)


def validate_params(params: Mapping[str, Any], constraints: Mapping[str, list[Any]], *, caller: str) -> None:
    """Validate several parameters at once (``constraints`` maps name to alternatives)."""
    for name, cons in constraints.items():
        check_param(name, params[name], cons, caller=caller)


def check_directory(name: str, value: Any, *, caller: str, hint: str | None = None, create: bool = True) -> str:
    """Check that ``value`` is a path usable as a folder (existing or to be created); return it as a str.

    Refused, before anything is created, when the path or one of its parents is an
    existing file: creating the folder would fail later, half-way through the work,
    with an ``OSError`` that names neither the parameter nor the file.

    Parameters
    ----------
    name : str
        The parameter's name (``"log_dir"``).
    value : object
        What the user passed.
    caller : str
        What the parameter belongs to (``"SummaryRecord"``).
    hint : str, optional
        Appended as ``HINT: ...``; by default one saying what to pass.
    create : bool, default=True
        Whether the caller creates the folder when it is missing (said in the message).

    Raises
    ------
    InvalidParameterError
        ``value`` is not a str or os.PathLike.
    InvalidDirectoryError
        ``value`` or a parent of it is an existing file.

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> check_directory("log_dir", os.path.join(folder, "new"), caller="SummaryRecord") == os.path.join(folder, "new")
    True
    >>> open(os.path.join(folder, "f"), "w").close()
    >>> check_directory("log_dir", os.path.join(folder, "f"), caller="SummaryRecord")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    collector.common._validation.InvalidDirectoryError: The 'log_dir' parameter of SummaryRecord must be a directory ...
    """
    check_param(name, value, ["path"], caller=caller)
    path = os.fspath(value)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    probe = os.path.abspath(path)
    while True:
        if os.path.lexists(probe) and not os.path.isdir(probe):
            where = "which is an existing file" if probe == os.path.abspath(path) else \
                f"but {probe!r} is an existing file"
            raise InvalidDirectoryError(
                f"The '{name}' parameter of {caller} must be a directory{' (created if missing)' if create else ''}. "
                f"Got {path!r}, "
                f"{where}. HINT: {hint or 'pass the path of a folder; a file of that name is in the way.'}")
        parent = os.path.dirname(probe)
        if parent == probe:
            return path
        probe = parent
