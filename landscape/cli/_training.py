"""Per-run training settings of a ``landscape run`` configuration, and its learning-rate schedule.

A ``[[runs]]`` entry may carry its own ``[runs.train]`` table (any key of ``[train]``) and a
``[runs.collect]`` table with ``intervals`` (the checkpoints a longer or shorter schedule
centres its planes on); they replace the shared values for that run only. Li et al.'s
comparison of networks with and without skip connections needs this: a deep plain network
trains far slower than a residual one, and planes around an untrained and a trained network
compare training as much as architecture.

The learning rate of every step is :func:`learning_rate_at`: a linear warm-up over the first
``warmup_epochs`` (Goyal et al., 2017: the rate of step ``k`` is ``(k + 1) / (warmup_epochs *
steps_per_epoch)`` of the full rate), then the full rate, multiplied by ``lr_gamma`` after
each of the ``lr_milestones`` epochs (torch's ``MultiStepLR``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from collector.common import InvalidParameterError, check_param

if TYPE_CHECKING:
    from landscape.cli._pipeline import PipelineConfig, RunSpec

__all__ = ["RUN_SECTION_KEYS", "flatten_section", "run_overrides", "effective_config", "learning_rate_at"]

#: The tables a ``[[runs]]`` entry may hold besides ``name`` and ``model``, and the keys each may
#: override. ``collect`` only for ``intervals``: the grid, the samples and the unit are shared,
#: or the planes could not be drawn on one set of levels and compared.
RUN_SECTION_KEYS = {"collect": {"intervals"}}


def flatten_section(section: str, values: Any, keys: set[str], where: str) -> dict[str, Any]:
    """The ``PipelineConfig`` fields one TOML table sets: ``{field: value}``.

    ``[generate] seed`` is the field ``generate_seed`` and ``[curvature] KEY`` (but
    ``eigen_ratio``) the field ``curvature_KEY``; an unknown key is refused, naming the
    accepted ones. ``where`` names the table in messages (``"[train]"``, ``"run 'a': [runs.train]"``).
    """
    check_param(section, values, [dict], caller=where)
    bad = set(values) - keys
    if bad:
        raise InvalidParameterError(f"{where}: unknown key(s) {sorted(bad)}; accepted: {sorted(keys)}")
    flat = {}
    for key, value in values.items():
        if section == "curvature" and key != "eigen_ratio":
            key = f"curvature_{key}"
        flat["generate_seed" if (section, key) == ("generate", "seed") else key] = value
    return flat


def run_overrides(run: dict[str, Any], index: int, train_keys: set[str], source: str) -> dict[str, Any]:
    """The fields ``[[runs]]`` entry number ``index`` sets for itself (its ``train`` and
    ``collect`` tables); any other key than ``name``, ``model``, ``train`` and ``collect`` is
    refused (a misspelt table would otherwise be ignored and the run trained with the shared
    settings)."""
    accepted = {"name", "model", "train", *RUN_SECTION_KEYS}
    bad = set(run) - accepted
    if bad:
        raise InvalidParameterError(f"{source}: unknown key(s) {sorted(bad)} in runs[{index}] "
                                    f"({run.get('name')!r}); accepted: {sorted(accepted)}. HINT: a run's own "
                                    "training settings go in a [runs.train] table after its [[runs]] line")
    sections = {"train": train_keys, **RUN_SECTION_KEYS}
    flat: dict[str, Any] = {}
    for section, keys in sections.items():
        if section in run:
            flat.update(flatten_section(section, run[section], keys, f"{source}: [runs.{section}] of runs[{index}]"))
    return flat


def effective_config(cfg: PipelineConfig, run: RunSpec) -> PipelineConfig:
    """``cfg`` with ``run``'s own training settings in place of the shared ones."""
    return dataclasses.replace(cfg, **run.overrides) if run.overrides else cfg


def learning_rate_at(cfg: PipelineConfig, step: int, steps_per_epoch: int) -> float:
    """The learning rate of training step ``step`` (0 for the first; also the number of steps
    done before it): ``learning_rate``, warmed up linearly over the first ``warmup_epochs``
    and multiplied by ``lr_gamma`` after each of the ``lr_milestones`` epochs."""
    passed = sum(step >= m * steps_per_epoch for m in cfg.lr_milestones)
    rate = cfg.learning_rate * cfg.lr_gamma ** passed
    warm = cfg.warmup_epochs * steps_per_epoch
    return rate * (step + 1) / warm if step < warm else rate
