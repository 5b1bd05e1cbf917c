"""MindSpore's own ``SummaryLandscape`` on bench_mindspore's workload, run in an interpreter that has
MindSpore (not this project's: ``python -m venv /opt/ms-venv && /opt/ms-venv/bin/pip install
mindspore==2.10.0 'numpy<2'``): the digits MLP (64-128-128-10), 10 epochs of 28 steps (batch 64,
Momentum 0.05/0.9) with ``SummaryCollector(collect_landscape=...)``, then
``gen_landscapes_with_multi_process`` of intervals [1..5] and [6..10] and the result landscape,
SIZE x SIZE, 512 samples, timed as the first call in the process. One JSON line.

    /opt/ms-venv/bin/python benchmarks/_mindspore_workload.py SUMMARY_DIR SIZE DIGITS.npz
"""
import json
import sys
import time

import numpy as np

t0 = time.perf_counter()
import mindspore as ms  # noqa: E402
import mindspore.dataset as ds  # noqa: E402
from mindspore import Model, nn  # noqa: E402
from mindspore.train import SummaryCollector, SummaryLandscape  # noqa: E402

t_import = time.perf_counter() - t0

SIZE = int(sys.argv[2]) if len(sys.argv) > 2 else 6


class MLP(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Dense(64, 128), nn.Dense(128, 128), nn.Dense(128, 10)
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


def dataset(x, y, bs):
    return ds.NumpySlicesDataset({"data": x, "label": y}, shuffle=False).batch(bs)


LANDSCAPE = {"landscape_size": SIZE, "unit": "epoch", "create_landscape": {"train": True, "result": True},
             "num_samples": 512, "intervals": [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]}

if __name__ == "__main__":
    ms.set_context(device_target="CPU")
    ms.set_seed(0)
    digits = np.load(sys.argv[3])
    x, y = digits["x"].astype(np.float32), digits["y"].astype(np.int32)
    summary_dir = sys.argv[1]
    net = MLP()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    model = Model(net, loss, opt, metrics={"Loss": nn.Loss()})
    sc = SummaryCollector(summary_dir, collect_specified_data={"collect_landscape": LANDSCAPE})
    t = time.perf_counter()
    model.train(10, dataset(x[:1792], y[:1792], 64), callbacks=[sc], dataset_sink_mode=False)
    t_train = time.perf_counter() - t

    def callback_fn():
        network = MLP()
        lf = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        metrics = {"Loss": nn.Loss()}
        m = Model(network, lf, metrics=metrics)
        return m, network, dataset(x[:512], y[:512], 64), metrics

    t = time.perf_counter()
    SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(callback_fn, collect_landscape=LANDSCAPE,
                                                                   device_ids=[0])
    t_gen = time.perf_counter() - t
    print(json.dumps({"mindspore": ms.__version__, "size": SIZE, "import_s": round(t_import, 2),
                      "train_s": round(t_train, 2), "gen_s": round(t_gen, 3)}), flush=True)
