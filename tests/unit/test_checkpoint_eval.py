"""Trained checkpoints are evaluated one way: the registry's models of checkpoints trained
here (served over HTTP) and the checkpoints ablations and co-training evaluate in-process
share one spec otherwise."""

from __future__ import annotations

from dataclasses import replace

from sv_dagster.training import catalog
from sv_dagster.training.evaluation import RULE_COUNTERPART, evaluate_checkpoint


def test_registry_checkpoint_models_sample_like_evaluate_checkpoint() -> None:
    local = [spec for spec in catalog.load_models().values() if spec.checkpoint_asset]
    assert local, "the training configs produce checkpoint models"
    for spec in local:
        config = catalog.training_config(spec.envs[0]) if len(spec.envs) == 1 else None
        tokens = config.eval_max_tokens if config else spec.sampling.max_tokens
        plain = catalog.checkpoint_spec(spec.name, spec.model, tokens)
        # The eval assets serve the checkpoint on loopback; the training process's own evals
        # load it in-process. Only that and what names and places the model differ.
        assert spec.served and spec.backend == "openai" and plain.backend == "local"
        assert (
            replace(
                spec,
                backend="local",
                envs=(),
                description="",
                checkpoint_asset=None,
                sweep=False,
                nightly=False,
                limits=(),
            )
            == plain
        )


def test_checkpoint_test_evals_take_each_environments_test_eval_limit() -> None:
    """E4's 1,065 test emails are scored 160 at a time by every checkpoint, stage 2's included;
    E1's checkpoints score their whole test split."""
    models = catalog.load_models()
    by_env = {spec.envs: spec for spec in models.values() if spec.checkpoint_asset and spec.name.endswith("-sft")}
    assert catalog.training_config("e4").test_eval_limit == 160
    assert by_env[("e4",)].limit_for("e4") == 160 and by_env[("e1",)].limit_for("e1") is None
    (stage2,) = [spec for spec in models.values() if spec.checkpoint_asset and len(spec.envs) > 1]
    assert {env: stage2.limit_for(env) for env in stage2.envs} == {"e1": None, "e4": 160}


def test_a_dialogue_checkpoint_without_a_counterpart_plays_the_rule_baseline(tmp_path, monkeypatch) -> None:
    from sv_dagster.core.envs import ENVS
    from sv_dagster.training import evaluation

    seen = {}

    def fake_evaluate(env, spec, backend, **kwargs):
        seen.update(spec=spec, counterpart_model=kwargs["counterpart_model"], concurrency=kwargs["concurrency"])
        return "run"

    monkeypatch.setattr(evaluation, "evaluate", fake_evaluate)
    monkeypatch.setattr(evaluation, "make_backend", lambda spec, env_id, checkpoint=None: (spec.name, env_id))
    attack = next(env for env in ENVS.values() if env.counterpart_env)
    assert (
        evaluate_checkpoint(
            attack, "ckpt", tmp_path, dataset_path=tmp_path / "d.jsonl", outputs_root=tmp_path, run_id="r", max_tokens=7
        )
        == "run"
    )
    assert seen["counterpart_model"] == RULE_COUNTERPART
    assert seen["spec"] == catalog.checkpoint_spec("ckpt", str(tmp_path), 7)
    assert seen["concurrency"] == catalog.CHECKPOINT_CONCURRENCY
    evaluate_checkpoint(
        attack,
        "ckpt",
        tmp_path,
        dataset_path=tmp_path / "d.jsonl",
        outputs_root=tmp_path,
        run_id="r",
        max_tokens=7,
        counterpart=("other", tmp_path / "other"),
    )
    assert seen["counterpart_model"] == catalog.checkpoint_spec("other", str(tmp_path / "other"), 7)
