"""The command's help works as printed: every option and argument has help, its examples parse,
negative ranges are values, and one range of sizes holds for the command and the API."""

from __future__ import annotations

import argparse
import re

import pytest
import torch
from torch import nn

from collector.common import InvalidParameterError
from collector.trajectory import validate_collect_landscape
from landscape import compute_landscape
from landscape.cli._main import build_parser


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """The top-level parser and every subcommand's, by name."""
    top = build_parser()
    out = {"landscape": top}
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            out.update(action.choices)
    return out


def test_every_option_and_argument_of_every_subcommand_has_help():
    missing = []
    parsers = _parsers()
    assert set(parsers) == {"landscape", "demo", "run", "gen", "plot", "ls", "export", "lineage", "report", "compare",
                            "curvature", "connect", "topology"}
    for name, parser in parsers.items():
        for action in parser._actions:
            if not action.help or action.help == argparse.SUPPRESS or not action.help.strip():
                missing.append(f"{name}: {action.option_strings or action.dest}")
        if isinstance(parser, argparse.ArgumentParser) and name != "landscape":
            assert parser.format_help()  # the help renders (no bad % in a help text)
    assert not missing, "without help: " + ", ".join(missing)


def test_task_help_documents_the_five_item_form():
    gen = _parsers()["gen"]
    (task,) = [a for a in gen._actions if "--task" in a.option_strings]
    text = " ".join(task.help.split())
    assert "(model, network, dataset, metrics)" in text
    assert "(model, network, dataset, metrics, task)" in text and "landscape.tasks.HuggingFace()" in text


def test_negative_ranges_are_values_as_the_help_prints_them():
    parser = build_parser()
    args = parser.parse_args(["gen", "run", "--task", "m:f", "--x", "-0.5:1.5:101", "--y", "-1:1:51"])
    assert args.x == (-0.5, 1.5, 101) and args.y == (-1.0, 1.0, 51)
    args = parser.parse_args(["gen", "run", "--task", "m:f", "--x=-0.5:1.5:101", "--y", "-.5:.5:3"])
    assert args.x == (-0.5, 1.5, 101) and args.y == (-0.5, 0.5, 3)
    # an option after a negative value is still an option
    args = parser.parse_args(["gen", "run", "--x", "-2:-1:3", "--task", "m:f"])
    assert args.x == (-2.0, -1.0, 3) and args.task == "m:f"


def test_every_example_in_the_gen_help_parses():
    """Each ``e.g. --opt VALUE`` of gen's help, given to the parser as printed."""
    gen = _parsers()["gen"]
    examples = re.findall(r"e\.g\. (--[a-z-]+) (\S+?)[,)\s]", " ".join(a.help for a in gen._actions) + " ")
    assert {opt for opt, _ in examples} >= {"--x", "--y"}
    for opt, value in examples:
        args = build_parser().parse_args(["gen", "run", "--task", "m:f", opt, value])
        assert getattr(args, opt.lstrip("-").replace("-", "_")) is not None


def _command_accepts(size: int) -> bool:
    try:
        build_parser().parse_args(["gen", "run", "--task", "m:f", "--size", str(size)])
    except SystemExit:
        return False
    return True


def _api_accepts(size: int) -> bool:
    # pca_method is checked after size: an error naming it means the size was accepted (no point computed)
    with pytest.raises(InvalidParameterError) as info:
        compute_landscape(nn.Linear(2, 2), nn.MSELoss(), (torch.zeros(4, 2), torch.zeros(4, 2)), size=size,
                          pca_method="bad")
    return "'pca_method'" in str(info.value)


def _collect_accepts(size: int) -> bool:
    try:
        validate_collect_landscape({"landscape_size": size}, "SummaryLandscape", require_intervals=False)
    except InvalidParameterError:
        return False
    return True


@pytest.mark.parametrize("size", [1, 2, 3, 40, 256, 257])
def test_one_range_of_sizes_for_the_command_and_the_api(size):
    expected = 3 <= size <= 256  # MindSpore's landscape_size: 3 to 256
    assert _command_accepts(size) is expected
    assert _api_accepts(size) is expected
    assert _collect_accepts(size) is expected


def test_size_refusals_name_the_range(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["gen", "run", "--task", "m:f", "--size", "1"])
    assert "argument --size: expected an int in [3, 256]" in capsys.readouterr().err
    with pytest.raises(InvalidParameterError, match=r"'size' parameter of compute_landscape.*\[3, 256\].*Got 2"):
        compute_landscape(nn.Linear(2, 2), nn.MSELoss(), (torch.zeros(4, 2), torch.zeros(4, 2)), size=2)


def test_a_negative_seed_is_refused_by_every_subcommand_naming_seed(capsys):
    seeded = [name for name, parser in _parsers().items()
              if any("--seed" in action.option_strings for action in parser._actions)]
    assert {"run", "compare", "gen", "curvature", "connect"} <= set(seeded)
    for name in seeded:
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args([name, "--seed", "-1"])
        assert exc.value.code == 2
        assert "argument --seed: expected an int >= 0; got -1" in capsys.readouterr().err, name
    assert build_parser().parse_args(["connect", "a", "b", "--task", "m:f", "-o", "o", "--seed", "0"]).seed == 0
