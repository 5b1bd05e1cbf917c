"""A DataLoader as MindSpore's DatasetGraph (collector.collect._dataset_graph)."""

from __future__ import annotations

import torch
from torch.utils.data import ConcatDataset, DataLoader, Subset, TensorDataset

from collector import SummaryReader, SummaryRecord, proto
from collector.collect._dataset_graph import dataset_graph


def _params(op_param) -> dict:
    out = {}
    for field in ("mapStr", "mapBool", "mapInt", "mapDouble"):
        out.update(dict(getattr(op_param, field)))
    out.update({k: list(v.strValue) for k, v in op_param.mapStrList.items()})
    return out


class Resize:
    def __init__(self, size):
        self.size = size

    def __call__(self, x):
        return x


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, x):
        return x


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class Digits(torch.utils.data.Dataset):
    def __init__(self, transform=None, target_transform=None) -> None:
        self.root = "/data/digits"
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self) -> int:
        return 100

    def __getitem__(self, i):
        return torch.zeros(4), 0


def test_batch_over_a_generator_like_mindspore():
    loader = DataLoader(TensorDataset(torch.zeros(10, 2)), batch_size=4, drop_last=True)
    g = dataset_graph(loader)
    assert _params(g.parameter) == {"op_type": "Batch", "batch_size": 4, "drop_remainder": True,
                                    "num_parallel_workers": 0, "pin_memory": False}
    assert len(g.children) == 1
    source = g.children[0]
    assert _params(source.parameter) == {"op_type": "TensorDataset", "num_samples": 10, "shuffle": False,
                                         "num_parallel_workers": 0}
    assert _params(source.sampler.operationParam) == {"sampler_name": "SequentialSampler", "num_samples": 10}
    assert len(source.children) == 0


def test_shuffle_workers_and_named_transforms():
    ds = Digits(Compose([Resize((8, 8)), Normalize([0.5], [0.25])]), target_transform=lambda y: y)
    loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, prefetch_factor=3)
    g = dataset_graph(loader)
    assert _params(g.parameter) == {"op_type": "Batch", "batch_size": 16, "drop_remainder": False,
                                    "num_parallel_workers": 2, "pin_memory": False, "prefetch_factor": 3}
    mapping = g.children[0]
    assert _params(mapping.parameter) == {"op_type": "Map", "num_parallel_workers": 2,
                                          "input_columns": ["transform", "target_transform"]}
    ops = [(_params(op.operationParam), list(op.size), list(op.weights)) for op in mapping.operations]
    assert ops == [
        ({"tensor_op_name": "Resize"}, [8, 8], []),
        ({"tensor_op_name": "Normalize", "mean": ["0.5"], "std": ["0.25"]}, [], [0.5, 0.25]),
        ({"tensor_op_name": "Lambda"}, [], []),
    ]
    source = mapping.children[0]
    assert _params(source.parameter) == {"op_type": "Digits", "num_samples": 100, "shuffle": True,
                                         "num_parallel_workers": 2, "dataset_dir": "/data/digits"}
    assert _params(source.sampler.operationParam) == {"sampler_name": "RandomSampler", "replacement": False,
                                                      "num_samples": 100}


def test_subset_and_concat_become_nodes_over_their_datasets():
    base = TensorDataset(torch.zeros(10, 2))
    loader = DataLoader(ConcatDataset([Subset(base, [0, 1, 2]), base]), batch_size=5)
    g = dataset_graph(loader)
    concat = g.children[0]
    assert _params(concat.parameter)["op_type"] == "Concat"
    assert _params(concat.parameter)["num_samples"] == 13
    subset, plain = concat.children
    assert _params(subset.parameter)["op_type"] == "Subset" and _params(subset.parameter)["num_samples"] == 3
    assert _params(subset.children[0].parameter)["op_type"] == "TensorDataset"
    assert _params(plain.parameter)["num_samples"] == 10


def test_other_iterables_get_one_node():
    g = dataset_graph([torch.zeros(2)])
    assert _params(g.parameter) == {"op_type": "list"}


def test_written_to_the_lineage_file(tmp_path):
    loader = DataLoader(TensorDataset(torch.zeros(6, 2)), batch_size=3)
    with SummaryRecord(tmp_path) as rec:
        rec.add_value("dataset_graph", "train_dataset", dataset_graph(loader))
        rec.record(0)
    (event,) = SummaryReader(tmp_path).lineage()
    assert isinstance(event.dataset_graph, proto.DatasetGraph)
    assert event.dataset_graph.parameter.mapInt["batch_size"] == 3
