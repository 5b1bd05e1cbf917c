"""The network graph (collector.summary._graph.build_graph): nodes, edges, scopes, parameter shapes.

Expectations are written by hand from each model's definition.
"""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from collector import SummaryReader, SummaryRecord, proto
from collector.summary._graph import build_graph


def _dims(type_proto) -> list[int]:
    return [d.size for d in type_proto.tensor_type.shape.dim]


def _nodes(graph) -> list[tuple]:
    """(name, op_type, scope, full_name, inputs) for every node."""
    return [(n.name, n.op_type, n.scope, n.full_name, [i.name for i in n.input]) for n in graph.node]


def _params(graph) -> dict[str, list[int]]:
    return {p.name: _dims(p.type) for p in graph.parameters}


def _out_shapes(graph) -> dict[str, list[int]]:
    return {n.name: _dims(n.output_type) for n in graph.node}


class MLP(nn.Module):
    """The spec's 4-3-2 MLP (fc1 Dense, ReLU, fc2 Dense)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2))
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(4 * 3 * 3, 10, bias=False)

    def forward(self, x):
        return self.fc(self.flatten(self.features(x)))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(2)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)) + x)


class ResNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer1 = nn.Sequential(Block())
        self.head = nn.Linear(2, 3)

    def forward(self, x):
        return self.head(self.layer1(x).mean(dim=(2, 3)))


def test_mlp_matches_mindspore_naming():
    g = build_graph(MLP())
    assert g.name == f"{__name__.replace('.', '_')}_MLP_forward"
    assert _nodes(g) == [
        ("1", "MatMul", "Default/fc1-Linear", "Default/fc1-Linear/MatMul-op0", ["x", "fc1.weight"]),
        ("2", "BiasAdd", "Default/fc1-Linear", "Default/fc1-Linear/BiasAdd-op1", ["1", "fc1.bias"]),
        ("3", "ReLU", "Default/relu-ReLU", "Default/relu-ReLU/ReLU-op2", ["2"]),
        ("4", "MatMul", "Default/fc2-Linear", "Default/fc2-Linear/MatMul-op3", ["3", "fc2.weight"]),
        ("5", "BiasAdd", "Default/fc2-Linear", "Default/fc2-Linear/BiasAdd-op4", ["4", "fc2.bias"]),
    ]
    assert [n.instance_name for n in g.node] == ["matmul", "bias_add", "relu", "matmul", "bias_add"]
    # Without example inputs the Linear's in_features gives the input; batch shown as -1.
    assert _params(g) == {"x": [-1, 4], "fc1.weight": [3, 4], "fc1.bias": [3], "fc2.weight": [2, 3],
                          "fc2.bias": [2]}
    assert list(_params(g)) == ["x", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert _out_shapes(g) == {"1": [-1, 3], "2": [-1, 3], "3": [-1, 3], "4": [-1, 2], "5": [-1, 2]}
    assert {p.type.tensor_type.elem_type for p in g.parameters} == {proto.DT_FLOAT32}
    assert [o.name for o in g.outputs] == ["5"]
    attrs = {a.name: a.value.int_val for a in g.node[0].attribute}
    assert attrs == {"in_features": 4, "out_features": 3}


def test_small_cnn_with_example_inputs():
    g = build_graph(SmallCNN(), torch.zeros(5, 1, 8, 8))
    assert _nodes(g) == [
        ("1", "Conv2D", "Default/features-Sequential/0-Conv2d", "Default/features-Sequential/0-Conv2d/Conv2D-op0",
         ["x", "features.0.weight"]),
        ("2", "BiasAdd", "Default/features-Sequential/0-Conv2d",
         "Default/features-Sequential/0-Conv2d/BiasAdd-op1", ["1", "features.0.bias"]),
        ("3", "ReLU", "Default/features-Sequential/1-ReLU", "Default/features-Sequential/1-ReLU/ReLU-op2", ["2"]),
        ("4", "MaxPool", "Default/features-Sequential/2-MaxPool2d",
         "Default/features-Sequential/2-MaxPool2d/MaxPool-op3", ["3"]),
        ("5", "Flatten", "Default/flatten-Flatten", "Default/flatten-Flatten/Flatten-op4", ["4"]),
        ("6", "MatMul", "Default/fc-Linear", "Default/fc-Linear/MatMul-op5", ["5", "fc.weight"]),  # no bias
    ]
    assert _params(g) == {"x": [5, 1, 8, 8], "features.0.weight": [4, 1, 3, 3], "features.0.bias": [4],
                          "fc.weight": [10, 36]}
    assert _out_shapes(g) == {"1": [5, 4, 6, 6], "2": [5, 4, 6, 6], "3": [5, 4, 6, 6], "4": [5, 4, 3, 3],
                              "5": [5, 36], "6": [5, 10]}
    conv_attrs = {a.name: a.value for a in g.node[0].attribute}
    assert list(conv_attrs["kernel_size"].int_vals) == [3, 3]
    assert conv_attrs["out_channels"].int_val == 4


def test_residual_model_has_the_skip_edge_and_nested_scopes():
    net = ResNetish()
    running_mean = net.layer1[0].bn.running_mean.clone()
    g = build_graph(net, (torch.randn(2, 2, 4, 4),))
    block = "Default/layer1-Sequential/0-Block"
    assert _nodes(g) == [
        ("1", "Conv2D", f"{block}/conv-Conv2d", f"{block}/conv-Conv2d/Conv2D-op0", ["x", "layer1.0.conv.weight"]),
        ("2", "BatchNorm", f"{block}/bn-BatchNorm2d", f"{block}/bn-BatchNorm2d/BatchNorm-op1",
         ["1", "layer1.0.bn.weight", "layer1.0.bn.bias", "layer1.0.bn.running_mean", "layer1.0.bn.running_var"]),
        ("3", "Add", block, f"{block}/Add-op2", ["2", "x"]),  # the residual connection
        ("4", "ReLU", block, f"{block}/ReLU-op3", ["3"]),
        ("5", "ReduceMean", "Default", "Default/ReduceMean-op4", ["4", "cst1"]),
        ("6", "MatMul", "Default/head-Linear", "Default/head-Linear/MatMul-op5", ["5", "head.weight"]),
        ("7", "BiasAdd", "Default/head-Linear", "Default/head-Linear/BiasAdd-op6", ["6", "head.bias"]),
    ]
    assert [(c.key, list(c.value.int_vals)) for c in g.const_vals] == [("cst1", [2, 3])]
    assert _params(g)["layer1.0.bn.running_var"] == [2]
    assert _params(g)["layer1.0.conv.weight"] == [2, 2, 3, 3]
    assert _out_shapes(g)["3"] == [2, 2, 4, 4] and _out_shapes(g)["7"] == [2, 3]
    # Shapes were propagated with fake tensors: BatchNorm statistics are untouched.
    torch.testing.assert_close(net.layer1[0].bn.running_mean, running_mean)
    assert int(net.layer1[0].bn.num_batches_tracked) == 0


def test_every_input_names_a_parameter_a_constant_or_an_earlier_node():
    g = build_graph(ResNetish(), torch.randn(1, 2, 4, 4))
    known = {p.name for p in g.parameters} | {c.key for c in g.const_vals}
    for node in g.node:
        for inp in node.input:
            assert inp.name in known, (node.name, inp.name)
        known.add(node.name)
    full_names = [n.full_name for n in g.node]
    assert len(set(full_names)) == len(full_names)
    assert not any(c in name for name in full_names for c in '<>"')  # MindInsight refuses these


class Untraceable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.fc2 = nn.Linear(3, 2)

    def forward(self, x):
        if x.sum() > 0:  # data-dependent: neither fx nor export can trace it
            x = -x
        return self.fc2(self.fc1(x))


class ShapeBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        if x.shape[0] > 1:  # fx cannot trace this; torch.export can
            x = x * 2
        return torch.relu(self.fc(x))


def test_untraceable_network_falls_back_to_the_module_tree(caplog):
    with caplog.at_level(logging.INFO, logger="collector.summary._graph"):
        g = build_graph(Untraceable())
    lines = [r.getMessage() for r in caplog.records if r.name == "collector.summary._graph"]
    assert len(lines) == 1 and "module tree" in lines[0] and "Untraceable" in lines[0]
    assert _nodes(g) == [
        ("1", "MatMul", "Default/fc1-Linear", "Default/fc1-Linear/MatMul-op0", ["x", "fc1.weight"]),
        ("2", "BiasAdd", "Default/fc1-Linear", "Default/fc1-Linear/BiasAdd-op1", ["1", "fc1.bias"]),
        ("3", "MatMul", "Default/fc2-Linear", "Default/fc2-Linear/MatMul-op2", ["2", "fc2.weight"]),
        ("4", "BiasAdd", "Default/fc2-Linear", "Default/fc2-Linear/BiasAdd-op3", ["3", "fc2.bias"]),
    ]
    assert _params(g)["fc2.weight"] == [2, 3]
    assert [o.name for o in g.outputs] == ["4"]


def test_fx_failure_with_example_inputs_uses_torch_export(caplog):
    with caplog.at_level(logging.INFO, logger="collector.summary._graph"):
        g = build_graph(ShapeBranch(), torch.zeros(3, 4))
    lines = [r.getMessage() for r in caplog.records if r.name == "collector.summary._graph"]
    assert len(lines) == 1 and "torch.export" in lines[0]
    ops = [(n.op_type, n.scope) for n in g.node]
    assert ops == [("Mul", "Default"), ("MatMul", "Default/fc-Linear"), ("ReLU", "Default")]
    assert [i.name for i in g.node[1].input] == ["1", "fc.weight", "fc.bias"]
    assert _params(g) == {"fc.weight": [2, 4], "fc.bias": [2], "x": [3, 4]}
    assert _out_shapes(g)["3"] == [3, 2]


def test_wrappers_are_looked_through():
    g = build_graph(nn.DataParallel(MLP()))
    assert [n.full_name for n in g.node][0] == "Default/fc1-Linear/MatMul-op0"


def test_summary_record_writes_the_graph_once(tmp_path):
    with SummaryRecord(tmp_path, network=MLP()) as rec:
        rec.add_value("scalar", "loss", 1.0)
        rec.record(1)
        rec.record(2)
    graphs = SummaryReader(tmp_path).graphs()
    assert len(graphs) == 1
    step, g = graphs[0]
    assert step == 1 and len(g.node) == 5 and g.node[2].scope == "Default/relu-ReLU"


@pytest.mark.parametrize("net", [MLP(), SmallCNN(), ResNetish()], ids=["mlp", "cnn", "residual"])
def test_graph_round_trips_through_the_proto(net):
    g = build_graph(net)
    again = proto.GraphProto.FromString(g.SerializeToString())
    assert again == g and len(again.node) > 0


class Mixed(nn.Module):
    """Dropout, LayerNorm, BatchNorm (eval), a buffer, a plain tensor attribute and two outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.drop = nn.Dropout(0.5)
        self.norm = nn.LayerNorm(16)
        self.bn = nn.BatchNorm1d(16)
        self.out = nn.Linear(16, 4)
        self.scale = torch.tensor([2.0, 1.0, 3.0, 0.5])
        self.register_buffer("shift", torch.ones(4))

    def forward(self, x):
        h = self.bn(self.norm(self.drop(torch.relu(self.fc(x)))))
        y = self.out(h) * self.scale + self.shift
        a, b = y.chunk(2, dim=1)
        return torch.softmax(a + b, dim=-1), y.view(-1, 2, 2)


@pytest.mark.parametrize("make", [MLP, Mixed, lambda: nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Dropout(0.1),
                                                                     nn.Linear(7, 2))], ids=["mlp", "mixed", "seq"])
def test_one_sample_shapes_equal_fake_tensor_shapes_without_side_effects(make, monkeypatch):
    """Shapes from the one-sample run equal those of fake tensors; nothing of the network changes."""
    from collector.summary import _graph
    torch.manual_seed(0)
    net = make()
    net.train()
    if isinstance(net, Mixed):
        net.bn.eval()  # BatchNorm1d cannot train on one sample; in eval mode it reads its statistics
    state = {k: v.clone() for k, v in net.state_dict().items()}
    rng = torch.get_rng_state()
    ran = []
    original = _graph._propagate_one_sample
    monkeypatch.setattr(_graph, "_propagate_one_sample", lambda gm, inputs: ran.append(1) or original(gm, inputs))
    fast = build_graph(net)
    assert ran and _out_shapes(fast)["1"] == [-1, _out_shapes(fast)["1"][1]]  # shapes, batch shown as -1
    assert torch.equal(torch.get_rng_state(), rng)  # dropout drew from a forked generator
    for key, value in net.state_dict().items():
        assert torch.equal(value, state[key]), key
    assert net.training and not any(k.startswith("_tensor_constant") for k in vars(net))
    monkeypatch.setattr(_graph, "_propagate_one_sample", lambda gm, inputs: False)
    assert build_graph(net).SerializeToString() == fast.SerializeToString()


@pytest.mark.parametrize("real", [True, False], ids=["real", "fake"])
def test_training_batchnorm_has_shapes_without_side_effects_or_output(real, monkeypatch, capfd):
    """A batch norm in training mode: the guessed batch (two samples: one cannot train it) gives every node its
    shape, on real tensors or on fake ones, with the statistics untouched and nothing printed (torch.fx's
    ShapeProp printed a traceback when a node failed)."""
    from collector.summary import _graph
    if not real:
        monkeypatch.setattr(_graph, "_propagate_one_sample", lambda gm, inputs: False)
    net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))
    state = {k: v.clone() for k, v in net.state_dict().items()}
    g = build_graph(net)
    assert [n.op_type for n in g.node] == ["MatMul", "BiasAdd", "BatchNorm", "ReLU", "MatMul", "BiasAdd"]
    assert _out_shapes(g) == {"1": [-1, 6], "2": [-1, 6], "3": [-1, 6], "4": [-1, 6], "5": [-1, 3], "6": [-1, 3]}
    for key, value in net.state_dict().items():
        assert torch.equal(value, state[key]), key
    assert net.training and capfd.readouterr() == ("", "")


def test_a_node_that_fails_leaves_the_graph_without_shapes_and_prints_nothing(monkeypatch, capfd, caplog):
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 6)

        def forward(self, x):
            return self.fc(x).view(5, -1)  # 2 x 6 values are no 5 rows: fails on the guessed batch

    with caplog.at_level("DEBUG", logger="collector.summary._graph"):
        g = build_graph(Odd())
    assert [n.op_type for n in g.node] == ["MatMul", "BiasAdd", "Reshape"]
    assert _out_shapes(g) == {"1": [], "2": [], "3": []}  # no shapes
    assert capfd.readouterr() == ("", "")
    assert "shape propagation failed" in caplog.text
