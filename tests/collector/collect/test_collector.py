"""SummaryCollector's parameter validation: every rule, its message, and nothing written."""

from __future__ import annotations

import re

import pytest

from collector import InvalidParameterError, SummaryCollector

CSD = "collect_specified_data"

BAD = [
    ("summary_dir type", dict(summary_dir=3), r"'summary_dir' parameter of SummaryCollector must be .*Got 3"),
    ("collect_freq 0", dict(collect_freq=0),
     re.escape("'collect_freq' parameter of SummaryCollector must be an int in the range [1, inf). Got 0 instead")),
    ("collect_freq float", dict(collect_freq=2.0), r"'collect_freq' .* Got 2\.0 instead"),
    ("num_process 0", dict(num_process=0), r"'num_process' parameter .*\[1, inf\)\. Got 0"),
    ("keep_default_action", dict(keep_default_action=1),
     r"'keep_default_action' parameter of SummaryCollector must be a bool\. Got 1"),
    ("csd not dict", dict(collect_specified_data=["collect_metric"]),
     r"'collect_specified_data' parameter of SummaryCollector must be a dict or None|"
     r"'collect_specified_data' parameter of SummaryCollector must be None or a dict"),
    ("csd unknown key", dict(collect_specified_data={"collect_loss": True}),
     r"'collect_specified_data' parameter of SummaryCollector has unknown key\(s\) \['collect_loss'\]; the "
     r"accepted keys are \['collect_metric', 'collect_graph', 'collect_train_lineage', 'collect_eval_lineage', "
     r"'collect_input_data', 'collect_dataset_graph', 'histogram_regular', 'collect_landscape'\]"),
    *[(f"csd {k} not bool", dict(collect_specified_data={k: "yes"}),
       re.escape(f"'{CSD}['{k}']' parameter of SummaryCollector must be a bool. Got 'yes' instead"))
      for k in ("collect_metric", "collect_graph", "collect_train_lineage", "collect_eval_lineage",
                "collect_input_data", "collect_dataset_graph")],
    ("histogram_regular type", dict(collect_specified_data={"histogram_regular": 5}),
     re.escape(f"'{CSD}['histogram_regular']' parameter of SummaryCollector must be None or a non-empty str. "
               "Got 5")),
    ("histogram_regular bad regex", dict(collect_specified_data={"histogram_regular": "fc[1"}),
     re.escape(f"'{CSD}['histogram_regular']' parameter of SummaryCollector must be a valid regular expression "
               "or None. Got 'fc[1'")),
    ("collect_landscape not dict", dict(collect_specified_data={"collect_landscape": True}),
     re.escape(f"'{CSD}['collect_landscape']' parameter of SummaryCollector must be a dict. Got True")),
    ("custom not dict", dict(custom_lineage_data=[("a", 1)]), r"'custom_lineage_data' parameter .* Got \[\('a', 1\)\]"),
    ("custom key", dict(custom_lineage_data={1: "a"}),
     r"'custom_lineage_data key' parameter of SummaryCollector must be a non-empty str\. Got 1"),
    ("custom list value", dict(custom_lineage_data={"a": [1]}),
     r"'custom_lineage_data\['a'\]' parameter of SummaryCollector must be a str, an int or a float\. Got \[1\] "
     r"instead\. HINT: MindInsight's lineage page shows str, int and float values only"),
    ("custom bool value", dict(custom_lineage_data={"a": True}), r"'custom_lineage_data\['a'\]' .* Got True"),
    ("custom None value", dict(custom_lineage_data={"a": None}), r"'custom_lineage_data\['a'\]' .* Got None"),
    ("tensor freq 0", dict(collect_tensor_freq=0), r"'collect_tensor_freq' parameter .*\[1, inf\) or None|"
                                                   r"'collect_tensor_freq' parameter .*None or an int in the range "
                                                   r"\[1, inf\)"),
    ("max_file_size", dict(max_file_size=-1), r"'max_file_size' parameter .*\[0, inf\).* Got -1"),
    ("export key", dict(export_options={"format": "npy"}),
     r"'export_options key' parameter of SummaryCollector must be one of 'tensor_format'\. Got 'format'"),
    ("export value", dict(export_options={"tensor_format": "png"}),
     r"'export_options\['tensor_format'\]' parameter of SummaryCollector must be one of 'npy' or None\. Got 'png'"),
]


@pytest.mark.parametrize("kwargs, pattern", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_invalid_parameters_write_nothing(tmp_path, kwargs, pattern):
    target = tmp_path / "run"
    kwargs = {"summary_dir": target, **kwargs}
    with pytest.raises(InvalidParameterError, match=pattern):
        SummaryCollector(**kwargs)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_summary_dir_that_is_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(InvalidParameterError, match="must be a directory"):
        SummaryCollector(path)


def test_valid_parameters_and_defaults(tmp_path):
    sc = SummaryCollector(tmp_path / "run", custom_lineage_data={"a": 1, "b": 0.5, "c": "x"},
                          export_options={"tensor_format": None}, max_file_size=0, collect_tensor_freq=3)
    assert (tmp_path / "run").is_dir() and list((tmp_path / "run").iterdir()) == []
    assert sc.collect_specified_data == {
        "collect_metric": True, "collect_graph": True, "collect_train_lineage": True, "collect_eval_lineage": True,
        "collect_input_data": True, "collect_dataset_graph": True, "histogram_regular": None,
        "collect_landscape": None}


def test_keep_default_action_false_collects_only_specified(tmp_path):
    sc = SummaryCollector(tmp_path, keep_default_action=False, collect_specified_data={"collect_metric": True})
    data = sc.collect_specified_data
    assert data["collect_metric"] is True
    assert not any(data[k] for k in ("collect_graph", "collect_train_lineage", "collect_eval_lineage",
                                     "collect_input_data", "collect_dataset_graph"))
