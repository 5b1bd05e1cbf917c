"""The permutation structure found by tracing: a random permutation through it leaves every
output unchanged (plain forward passes of the original and a permuted copy, eval and train
mode), for the kinds of networks users align; the inverse undoes it bit for bit; what cannot
be permuted is named; a hand-written spec that does not fit is refused."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from collector.common import InvalidParameterError
from landscape.connect import Alignment, FunctionChanged, PermutationSpec, align, permutation_spec
from landscape.examples import MLP, DigitsResNet, SmallCNN
from tests.landscape.connect._models import CumsumMLP

TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def _permuted_copy(model: nn.Module, spec: PermutationSpec, seed: int) -> tuple[nn.Module, dict]:
    g = torch.Generator().manual_seed(seed)
    perms = {k: torch.randperm(n, generator=g) for k, n in spec.groups.items()}
    other = copy.deepcopy(model)
    other.load_state_dict(spec.apply(model.state_dict(), perms))
    return other, perms


def _assert_same_function(model: nn.Module, other: nn.Module, call, dtype: torch.dtype) -> None:
    for train in (False, True):
        a = call(copy.deepcopy(model).train(train))
        b = call(copy.deepcopy(other).train(train))
        rel = float((a - b).abs().max() / a.abs().max())
        assert rel <= TOL[dtype], (train, rel)


def _tensor_call(x: torch.Tensor):
    def call(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(x)
    return call


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mlp_groups_and_invariance(dtype):
    torch.manual_seed(0)
    model = MLP(hidden=32).to(dtype)
    x = torch.rand(16, 64, dtype=dtype)
    spec = permutation_spec(model, (x, torch.zeros(16)))
    assert sorted(spec.groups.values()) == [32, 32]
    assert spec.axes["fc1.weight"][1] == ("fixed", 64)  # the input
    assert spec.axes["fc3.weight"][0] == ("fixed", 10)  # the output
    other, _ = _permuted_copy(model, spec, 1)
    assert not torch.equal(other.fc1.weight, model.fc1.weight)
    _assert_same_function(model, other, _tensor_call(x), dtype)


def test_cnn_with_batch_norm_permutes_running_statistics():
    torch.manual_seed(0)
    model = SmallCNN(channels=4).double()
    with torch.no_grad():  # statistics that differ per channel, so a wrong order shows
        model.bn1.running_mean.uniform_(-1, 1)
        model.bn1.running_var.uniform_(0.5, 2)
    x = torch.rand(8, 1, 8, 8, dtype=torch.float64)
    spec = permutation_spec(model, (x, None))
    assert sorted(spec.groups.values()) == [4, 8]
    g = spec.axes["conv1.weight"][0][1]
    assert spec.axes["bn1.running_mean"] == (("var", g, 4),)
    assert spec.axes["bn1.num_batches_tracked"] == ()
    # the flatten after the convolution: fc's input axis is (channels x 4 x 4), the channels permuted
    assert spec.axes["fc.weight"][1][0] == "kron"
    other, _ = _permuted_copy(model, spec, 2)
    assert torch.equal(other.bn1.num_batches_tracked, model.bn1.num_batches_tracked)
    _assert_same_function(model, other, _tensor_call(x), torch.float64)


def test_resnet20_streams_shared_by_residual_adds():
    torch.manual_seed(0)
    model = DigitsResNet(20, channels=4).double()
    x = torch.rand(8, 1, 8, 8, dtype=torch.float64)
    spec = permutation_spec(model, (x, None))
    # three residual streams (one per stage) and two inner groups per block... one per block here: 9
    assert len(spec.groups) == 12
    stream = spec.axes["conv.weight"][0][1]
    assert spec.axes["blocks.0.conv2.weight"][0][1] == stream  # writes into the stream
    assert spec.axes["blocks.1.conv1.weight"][1][1] == stream  # reads from it
    other, _ = _permuted_copy(model, spec, 3)
    _assert_same_function(model, other, _tensor_call(x), torch.float64)


def test_resnet18_torchvision_layout():
    from benchmarks._models import ResNet18

    torch.manual_seed(0)
    model = ResNet18().double()
    x = torch.rand(2, 3, 64, 64, dtype=torch.float64)
    spec = permutation_spec(model, (x, None))
    assert len(spec.groups) == 12  # four streams, eight inner groups
    other, _ = _permuted_copy(model, spec, 4)
    _assert_same_function(model, other, _tensor_call(x), torch.float64)


def test_transformer_encoder_layer_heads_and_feed_forward():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
                          nn.Linear(16, 3)).double()
    x = torch.rand(3, 5, 8, dtype=torch.float64)
    spec = permutation_spec(model, (x, None))
    sizes = sorted(spec.groups.values())
    assert sizes == [4, 4, 16, 32]  # heads, features of a head, the stream, the feed-forward units
    assert spec.axes["1.self_attn.in_proj_weight"][0][0] == "kron"
    other, _ = _permuted_copy(model, spec, 5)
    _assert_same_function(model, other, _tensor_call(x), torch.float64)


def test_hugging_face_gpt2_heads_and_feed_forward():
    from benchmarks._models import _gpt2

    model = _gpt2().double()  # 2 layers, 2 heads of 32, 64 wide, feed-forward 256
    ids = torch.randint(0, 1000, (2, 8), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids}
    spec = permutation_spec(model, batch)
    sizes = sorted(spec.groups.values())
    assert sizes.count(256) == 2 and sizes.count(64) == 1 and sizes.count(2) == 2
    attn = spec.axes["transformer.h.0.attn.c_attn.weight"][1]
    assert attn[0] == "cat"  # queries, keys, values
    assert [part[0] for part in attn[1]] == ["kron", "kron", "kron"]  # each heads x features
    assert attn[1][0][1][0] == attn[1][1][1][0] == attn[1][2][1][0]  # heads permuted whole, consistently
    # the tied embedding and output layer: one layout
    assert spec.axes["lm_head.weight"] == spec.axes["transformer.wte.weight"]
    other, _ = _permuted_copy(model, spec, 6)

    def call(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(**batch).logits

    _assert_same_function(model, other, call, torch.float64)


def test_inverse_restores_the_same_bits():
    torch.manual_seed(0)
    model = DigitsResNet(8, channels=4)
    x = torch.rand(8, 1, 8, 8)
    pi = Alignment.random(model, (x, torch.zeros(8, dtype=torch.long)), seed=7)
    assert pi.checked is not None and pi.checked["eval"] <= 1e-5 and pi.checked["train"] <= 1e-5
    moved = pi.apply(model)
    back = pi.inverse().apply(moved)
    assert any(not torch.equal(moved.state_dict()[k], t) for k, t in model.state_dict().items())
    for k, t in model.state_dict().items():
        assert torch.equal(back.state_dict()[k], t), k


def test_layer_that_cannot_be_permuted_is_named():
    torch.manual_seed(0)
    model = CumsumMLP()
    x = torch.rand(4, 4)
    spec = permutation_spec(model, (x, None))
    assert list(spec.groups.values()) == [8]  # fc1's units; mix's outputs feed the cumulative sum
    report = spec.report()
    assert "cumsum" in report and "mix.weight[0]" in report
    assert ("mix.weight", 0) in {(k, a) for k, a, _ in spec.surprising()}
    other, _ = _permuted_copy(model, spec, 8)
    _assert_same_function(model, other, _tensor_call(x), torch.float32)


def test_hand_written_spec_that_breaks_the_function_is_refused():
    torch.manual_seed(0)
    model = MLP(hidden=8)
    data = (torch.rand(16, 64), torch.zeros(16, dtype=torch.long))
    # fc1's bias is not permuted with its weight: the first operation that differs is fc1's
    bad = {"fc1.weight": ("P1", None), "fc2.weight": (None, "P1")}
    pi = Alignment.random(model, spec=bad, seed=1)
    with pytest.raises(FunctionChanged, match="'fc1'"):
        pi.check(model, data)


def test_outputs_made_nan_by_the_input_do_not_hide_a_wrong_spec():
    torch.manual_seed(0)
    model = MLP(hidden=8)
    x = torch.rand(16, 64)
    x[3, 5] = float("nan")  # sample 3's outputs are NaN in both networks; the other 15 still differ
    bad = {"fc1.weight": ("P1", None), "fc2.weight": (None, "P1")}
    with pytest.raises(FunctionChanged, match="eval mode"):
        Alignment.random(model, spec=bad, seed=1).check(model, (x, torch.zeros(16, dtype=torch.long)))
    good = Alignment.random(model, (x, torch.zeros(16, dtype=torch.long)), seed=1)  # traced, checked
    assert good.checked["eval"] <= 1e-5


def test_spec_that_does_not_fit_is_refused_before_any_work():
    model = MLP(hidden=8)
    data = (torch.rand(4, 64), torch.zeros(4, dtype=torch.long))
    with pytest.raises(InvalidParameterError, match="'fc9.weight'"):
        align(model, copy.deepcopy(model), data=data, spec={"fc9.weight": ("P", None)})
    with pytest.raises(InvalidParameterError, match="2 axes"):
        align(model, copy.deepcopy(model), data=data, spec={"fc1.weight": ("P",)})
    other_spec = permutation_spec(MLP(hidden=4), data)
    with pytest.raises(InvalidParameterError, match="does not fit"):
        align(model, copy.deepcopy(model), data=data, spec=other_spec)



def test_llama_block_with_grouped_query_attention():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(cfg).double().eval()
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(0))
    spec = permutation_spec(model, {"input_ids": ids})
    assert "float32" in spec.dtypes  # its norms compute in float32: checked at float32's tolerance
    q = spec.axes["model.layers.0.self_attn.q_proj.weight"][0]
    k = spec.axes["model.layers.0.self_attn.k_proj.weight"][0]
    # a query head reads key head i // 2: the query heads are (key head, repeat), the key heads' factor shared
    assert q[0] == "kron" and q[1][0][0] == "kron" and q[1][0][1][0] == k[1][0]
    other, _ = _permuted_copy(model, spec, 9)

    def call(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(input_ids=ids).logits

    _assert_same_function(model, other, call, torch.float32)


def test_conv1d_group_norm_grouped_convolution_embedding_layer_norm():
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(50, 8)
            self.conv = nn.Conv1d(8, 12, 3, padding=1)
            self.gn = nn.GroupNorm(4, 12)
            self.conv2 = nn.Conv1d(12, 12, 3, padding=1, groups=4)
            self.ln = nn.LayerNorm(12)
            self.fc = nn.Linear(12, 3)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.gn(self.conv(self.emb(ids).transpose(1, 2))))
            return self.fc(self.ln(torch.relu(self.conv2(h)).mean(-1)))

    torch.manual_seed(0)
    model = Net().double()
    ids = torch.randint(0, 50, (4, 10), generator=torch.Generator().manual_seed(0))
    spec = permutation_spec(model, (ids, None))
    assert spec.axes["emb.weight"][0] == ("fixed", 50)  # rows looked up by index
    assert spec.axes["gn.weight"][0][0] == "kron"  # whole groups (and one order within every group)
    assert not spec.surprising()
    other, _ = _permuted_copy(model, spec, 10)
    _assert_same_function(model, other, _tensor_call(ids), torch.float64)
