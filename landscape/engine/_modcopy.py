"""A copy of a module tree, as ``copy.deepcopy`` makes it, without its per-object cost (private).

Every engine copies the caller's modules (:func:`landscape.engine._placement.network_at`), and
``copy.deepcopy`` spends most of that copy on the dozen empty hook dictionaries of each module
and its generic reduce protocol: 0.3 ms for the digits MLP, 5-10 ms for a ResNet-20 of 74
modules, paid by the planner's probe and by the engine of every landscape. :func:`copy_modules`
makes the same copy: a module whose class copies the default way (no ``__deepcopy__``, the
default reduce, no ``__slots__``) is rebuilt here as ``deepcopy`` rebuilds it -- ``cls.__new__``,
its ``__getstate__`` copied, its ``__setstate__`` -- with immutable values shared (as ``deepcopy``
shares them) and dicts, sets and lists copied; anything else, and any module of another class, is
handed to ``copy.deepcopy`` with the same memo. The memo is ``deepcopy``'s: objects in it (the
engine's parameters over the centre) are used as they are, and an object reached twice is copied
once.
"""

from __future__ import annotations

import copy
import types
from collections import OrderedDict
from typing import Any

import torch
from torch import nn

__all__ = ["copy_modules"]

#: Types ``copy.deepcopy`` returns as they are (its atomic types), and torch's immutable descriptors.
_SHARED = frozenset({type(None), int, float, bool, complex, str, bytes, type, range, types.FunctionType,
                     types.BuiltinFunctionType, torch.dtype, torch.device, torch.layout, torch.memory_format})


def _rebuilt_here(cls: type, answers: dict[type, bool]) -> bool:
    """Whether ``deepcopy`` copies a module of ``cls`` the default way: ``cls.__new__(cls)``, then
    ``__setstate__`` of its ``__getstate__`` copied (what the default reduce gives); ``answers``: this
    copy's, by class (nothing outlives the call)."""
    answer = answers.get(cls)
    if answer is None:
        answer = answers[cls] = (
            issubclass(cls, nn.Module) and cls.__new__ is object.__new__ and getattr(cls, "__deepcopy__", None) is None
            and cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
            and not hasattr(cls, "__getnewargs_ex__") and not hasattr(cls, "__getnewargs__")
            and not any("__slots__" in c.__dict__ for c in cls.__mro__[:-1]))
    return answer


def copy_modules(obj: Any, memo: dict[int, Any]) -> Any:
    """``copy.deepcopy(obj, memo)``, module trees made faster (the module docstring)."""
    return _copy(obj, memo, {})


def _copy(obj: Any, memo: dict[int, Any], answers: dict[type, bool]) -> Any:
    kind = type(obj)
    if kind in _SHARED:
        return obj
    got = memo.get(id(obj), memo)
    if got is not memo:
        return got
    if kind is dict or kind is OrderedDict:  # the modules' own containers: hooks, parameters, submodules
        out: dict[Any, Any] = kind()
        memo[id(obj)] = out
        for key, value in obj.items():
            out[_copy(key, memo, answers)] = _copy(value, memo, answers)
        return out
    if kind is list:
        items: list[Any] = []
        memo[id(obj)] = items
        items.extend(_copy(value, memo, answers) for value in obj)
        return items
    if kind is tuple and all(type(value) in _SHARED for value in obj):  # deepcopy returns such a tuple itself
        return obj
    if kind is set and all(type(value) in _SHARED for value in obj):
        out_set = set(obj)
        memo[id(obj)] = out_set
        return out_set
    if _rebuilt_here(kind, answers):
        module = object.__new__(kind)  # cls.__new__(cls): the class defines no __new__
        memo[id(obj)] = module
        state = obj.__getstate__()
        module.__setstate__({key: _copy(value, memo, answers) for key, value in state.items()})
        return module
    return copy.deepcopy(obj, memo)
