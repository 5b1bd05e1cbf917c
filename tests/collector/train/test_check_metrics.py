"""collector.train.check_metrics: the accepted forms of metrics, and a message listing them otherwise."""

from __future__ import annotations

import pytest

from collector.common import InvalidParameterError
from collector.train import Accuracy, check_metrics


@pytest.mark.parametrize("metrics", [None, {}, {"acc": Accuracy()}, {"top": lambda out, lab: 0.5}, ["accuracy"],
                                     ("Loss",), {"acc"}])
def test_accepted_forms(metrics):
    check_metrics(metrics, name="metrics", caller="f")


@pytest.mark.parametrize("metrics, words", [
    ("accuracy", r"The 'metrics' parameter of f must be None, a dict of name to metric .* or a list, tuple or set "
                 r"of metric names from \['acc', 'accuracy', 'loss'\]\. Got 'accuracy' \(str\) instead\. "
                 r"HINT: one metric by name is a list: \['accuracy'\]"),
    (3, r"Got 3 \(int\) instead"),
    (["accuracy", "f1"], r"holds 'f1', which is not a metric name"),
    ({"acc": 42}, r"The 'metrics\['acc'\]' parameter of f must be a metric"),
])
def test_refused_forms_name_the_parameter(metrics, words):
    with pytest.raises(InvalidParameterError, match=words):
        check_metrics(metrics, name="metrics", caller="f")
