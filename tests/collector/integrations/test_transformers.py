"""HFCollector: a Hugging Face Trainer on a tiny GPT-2 built from its config (no download)."""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402

from collector import SummaryReader, get_summary_lineage  # noqa: E402
from collector.integrations import HFCollector  # noqa: E402
from landscape import SummaryLandscape  # noqa: E402
from tests.collector.integrations._reference import assert_grid_values, load  # noqa: E402

CONFIG = dict(vocab_size=32, n_positions=16, n_embd=16, n_layer=2, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
              attn_pdrop=0.0)
INTERVALS = [[3, 6, 9], [12, 15, 18]]
NUM_SAMPLES = 32
# torch's notice when the landscape engine batches GPT-2's attention with vmap on the CPU
pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop because we have not yet implemented")


class Tokens(torch.utils.data.Dataset):
    """Counting sequences (start + k * step mod vocab): a tiny corpus a tiny GPT-2 can learn."""

    def __init__(self, n: int = 96, length: int = 12, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, CONFIG["vocab_size"], (n, 1), generator=g)
        step = torch.randint(1, 3, (n, 1), generator=g)
        self.ids = (start + step * torch.arange(length)) % CONFIG["vocab_size"]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _model() -> GPT2LMHeadModel:
    return GPT2LMHeadModel(GPT2Config(**CONFIG))


def _args(out, **kwargs) -> TrainingArguments:
    base = dict(output_dir=str(out), per_device_train_batch_size=8, gradient_accumulation_steps=2,
                num_train_epochs=3, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
                learning_rate=5e-3, seed=0, disable_tqdm=True, per_device_eval_batch_size=32)
    base.update(kwargs)
    return TrainingArguments(**base)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """96 sequences, batches of 8, accumulation 2: 6 optimizer steps per epoch, 18 in all."""
    tmp = tmp_path_factory.mktemp("hf")
    run = tmp / "run"
    torch.manual_seed(0)
    cb = HFCollector(run, collect_freq=3, collect_specified_data={"collect_landscape": {
        "unit": "step", "intervals": INTERVALS, "landscape_size": 5, "num_samples": NUM_SAMPLES}})
    trainer = Trainer(model=_model(), args=_args(tmp / "out", eval_strategy="epoch"), train_dataset=Tokens(),
                      eval_dataset=Tokens(32, seed=1), callbacks=[cb])
    trainer.train()
    return run, trainer


def test_loss_from_the_trainers_logs_histograms_and_checkpoints(trained):
    run, trainer = trained
    assert trainer.state.global_step == 18
    reader = SummaryReader(run)
    assert not reader.issues
    logged = [(h["step"], h["loss"]) for h in trainer.state.log_history if "loss" in h]
    steps, values = reader.scalars()["loss/auto"]
    assert steps.tolist() == [s for s, _ in logged] == list(range(1, 19))
    np.testing.assert_array_equal(values, np.float32([v for _, v in logged]))
    first_five = [f"{n}/auto" for n, _ in trainer.model.named_parameters()][:5]
    hist = reader.histograms()
    assert list(hist) == first_five
    assert [h["step"] for h in hist[first_five[0]]] == [1, 3, 6, 9, 12, 15, 18]
    md = json.loads((run / "ckpt_dir" / "train_metadata.json").read_text())
    assert md["epoch_group"] == {"0": INTERVALS[0], "1": INTERVALS[1]}
    assert md["step_per_epoch"] == 6 and md["unit"] == "step"
    final = load(run / "ckpt_dir" / "GPT2LMHeadModel_18_step.pt")
    for k, t in trainer.model.state_dict().items():
        torch.testing.assert_close(final[k], t)


def test_lineage_from_training_and_evaluation(trained):
    run, trainer = trained
    lin = get_summary_lineage(str(run))
    hp = lin["hyper_parameters"]
    assert hp["optimizer"] == "AdamW" and hp["learning_rate"] == pytest.approx(5e-3)
    assert hp["epoch"] == 3 and hp["batch_size"] == 8
    assert lin["algorithm"]["network"] == "GPT2LMHeadModel"
    last_loss = [h["loss"] for h in trainer.state.log_history if "loss" in h][-1]
    assert lin["algorithm"]["loss"] == pytest.approx(last_loss, rel=1e-6)
    last_eval = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h][-1]
    assert lin["metric"] == {"eval_loss": pytest.approx(last_eval, rel=1e-6)}  # no timings, no epoch


def test_landscapes_of_a_gpt2_run_match_a_plain_evaluation(trained, tmp_path):
    """SummaryLandscape with the task API (dict batches, output.loss); values from load_state_dict + forward."""
    from landscape.tasks import HuggingFace

    run, _ = trained
    data = Tokens(32, seed=1)

    def callback_fn():
        loader = torch.utils.data.DataLoader(data, batch_size=16)
        return None, _model(), loader, None, HuggingFace()

    landscapes = SummaryLandscape(run).gen_landscapes_with_multi_process(callback_fn, output=tmp_path)
    assert [ls.tag for ls in landscapes] == ["landscape_[3, 9]", "landscape_[12, 18]", "landscape_[18]"]
    md = json.loads((run / "ckpt_dir" / "train_metadata.json").read_text())
    ref = _model().eval()
    batch = {"input_ids": data.ids[:NUM_SAMPLES], "labels": data.ids[:NUM_SAMPLES]}

    def loss_at(state):
        state = dict(state)
        state["lm_head.weight"] = state["transformer.wte.weight"]  # tied: one parameter, moved once
        ref.load_state_dict(state, strict=False)
        with torch.no_grad():
            return float(ref(**batch).loss)

    for ls, numbers in zip(landscapes, [*INTERVALS, [18]]):
        states = [load(run / "ckpt_dir" / md["model_params_file_map"][str(n)]) for n in numbers]
        assert "lm_head.weight" not in ls.metadata["moved_parameters"]
        assert_grid_values(ls, states, loss_at, [(0, 0), (2, 2), (4, 1)])


def test_epoch_unit_and_max_steps(tmp_path):
    """unit "epoch": epochs 1 and 2 complete, the third cut short by max_steps saves nothing."""
    run = tmp_path / "run"
    torch.manual_seed(0)
    cb = HFCollector(run, collect_freq=5, collect_specified_data={"collect_landscape": {
        "unit": "epoch", "intervals": [[1, 2, 3]], "landscape_size": 5, "num_samples": NUM_SAMPLES}})
    trainer = Trainer(model=_model(), args=_args(tmp_path / "out", max_steps=15, logging_steps=5),
                      train_dataset=Tokens(), callbacks=[cb])
    trainer.train()
    assert trainer.state.global_step == 15
    md = json.loads((run / "ckpt_dir" / "train_metadata.json").read_text())
    assert md["epoch_group"] == {} and sorted(md["model_params_file_map"]) == ["1", "2"]
    assert SummaryReader(run).scalars()["loss/auto"][0].tolist() == [5, 10, 15]
    assert get_summary_lineage(str(run))["hyper_parameters"]["epoch"] == 3


def test_other_processes_create_nothing(tmp_path, monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setenv("RANK", "1")
    cb = HFCollector(tmp_path / "run")
    state = SimpleNamespace(is_world_process_zero=False, global_step=0, max_steps=10, epoch=1.0)
    cb.on_train_begin(None, state, None, model=_model(), optimizer=None, train_dataloader=[1, 2])
    cb.on_step_end(None, state, None)
    cb.on_log(None, state, None, logs={"loss": 1.0})
    cb.on_epoch_end(None, state, None)
    cb.on_evaluate(None, state, None, metrics={"eval_loss": 1.0})
    cb.on_train_end(None, state, None)
    assert list(tmp_path.iterdir()) == []


def test_resumed_training_continues_numbers_and_intervals(tmp_path):
    """Stopped after step 9 (a checkpoint saved there), then resumed from it: one run's numbering and intervals."""
    from transformers import TrainerCallback

    class StopAt9(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 9:
                control.should_training_stop = True

    run, out = tmp_path / "run", tmp_path / "out"
    specified = {"collect_landscape": {"unit": "step", "intervals": INTERVALS, "landscape_size": 5}}
    args = _args(out, save_strategy="steps", save_steps=9, logging_steps=3)
    torch.manual_seed(0)
    first = Trainer(model=_model(), args=args, train_dataset=Tokens(),
                    callbacks=[HFCollector(run, collect_freq=3, collect_specified_data=specified), StopAt9()])
    first.train()
    assert first.state.global_step == 9
    md = json.loads((run / "ckpt_dir" / "train_metadata.json").read_text())
    assert md["epoch_group"] == {"0": INTERVALS[0]}
    second = Trainer(model=_model(), args=args, train_dataset=Tokens(),
                     callbacks=[HFCollector(run, collect_freq=3, collect_specified_data=specified)])
    second.train(resume_from_checkpoint=str(out / "checkpoint-9"))
    assert second.state.global_step == 18
    steps, _ = SummaryReader(run).scalars()["loss/auto"]
    assert steps.tolist() == [3, 6, 9, 12, 15, 18]
    md = json.loads((run / "ckpt_dir" / "train_metadata.json").read_text())
    assert md["epoch_group"] == {"0": INTERVALS[0], "1": INTERVALS[1]}
    hist_steps = [h["step"] for h in SummaryReader(run).histograms()["transformer.wte.weight/auto"]]
    assert hist_steps == [1, 3, 6, 9, 10, 12, 15, 18]  # each part's first step, then every third
