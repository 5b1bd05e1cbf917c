"""Lineage messages built from datasets and run-context arguments."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset, SubsetRandomSampler, TensorDataset

from collector.lineage._build import custom_lineage, dataset_graph, dataset_path, dataset_size


class Folder(Dataset):
    root = "/data/digits"

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.zeros(2), 0


def test_dataset_graph_of_dataloader():
    loader = DataLoader(Folder(), batch_size=4, drop_last=True, num_workers=0)
    graph = dataset_graph(loader)
    assert dict(graph.parameter.mapStr) == {"op_type": "Batch"}
    assert dict(graph.parameter.mapInt) == {"batch_size": 4, "num_parallel_workers": 0}
    assert dict(graph.parameter.mapBool) == {"drop_remainder": True}
    child = graph.children[0]
    assert child.parameter.mapStr["op_type"] == "Folder" and child.parameter.mapStr["dataset_dir"] == "/data/digits"
    assert not child.parameter.mapBool["shuffle"]
    assert child.sampler.operationParam.mapStr["sampler_name"] == "SequentialSampler"
    assert dataset_path(loader) == "/data/digits"
    assert dataset_size(loader, 2, 4) == 8


def test_dataset_graph_of_plain_iterable_and_sizes():
    graph = dataset_graph([(1, 2)])
    assert graph.parameter.mapStr["op_type"] == "list" and not graph.children
    ds = TensorDataset(torch.zeros(10, 2))
    assert dataset_size(DataLoader(ds, batch_size=3), 4, 3) == 10
    assert dataset_size(DataLoader(ds, batch_size=3, sampler=SubsetRandomSampler(range(5))), 2, 3) == 5
    assert dataset_size([1, 2], 2, 8) == 16
    assert dataset_size(iter([]), None, None) is None


def test_custom_lineage_packing():
    info = custom_lineage({"a": 1, "b": 0.5, "c": "x", "big": 2**40})
    entries = [(dict(u.map_int32), dict(u.map_double), dict(u.map_str)) for u in info.user_info]
    assert entries == [({"a": 1}, {}, {}), ({}, {"b": 0.5}, {}), ({}, {}, {"c": "x"}), ({}, {"big": 2.0**40}, {})]
