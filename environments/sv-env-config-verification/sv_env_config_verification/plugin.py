"""E2 as the pipeline sees it (entry point `sv_dagster.environments`)."""

from sv_env_config_verification.answer import parse_completion
from sv_env_config_verification.baseline import heuristic_reply
from sv_env_config_verification.config import load_reward_settings
from sv_env_config_verification.corpora import CORPORA
from sv_env_config_verification.sft import SFT
from sv_env_config_verification.synthetic_batch import SYNTHETIC
from sv_shared.environment import Environment, LazyFunction, Row, detail, reward


def canonical_config(row: Row) -> str:
    """The config file's content (the file name and findings are not the example)."""
    return str(row.get("content") or row.get("question") or "")


RATES = {
    # Finding F1 (severity-weighted, per file), patch success (the patch applied and
    # removed findings without adding any), clean pass (clean files only: answered with no
    # violations), and whether the answer was grounded in the tools' results.
    "finding_f1": lambda row: detail(row, "detection", "f1"),
    "finding_precision": lambda row: detail(row, "detection", "precision"),
    "finding_recall": lambda row: detail(row, "detection", "recall"),
    "patch_success": lambda row: None if row.get("details") is None else float(bool(detail(row, "patch_success"))),
    "clean_pass": lambda row: float(bool(detail(row, "answered_clean"))) if detail(row, "clean") else None,
    "grounding": lambda row: reward(row, "grounding"),
}


def label_agreement(rows: list[Row], summary: dict) -> dict:
    """Where a file's source labels it (Terrascan's fail/success folder, a bundled file's
    hand label), how that label and the tools' verdict on the original file compare: the
    tools flag it (misconfigured) or find nothing (clean). A line for the tables says where
    they disagree."""
    pairs = [
        (bool(detail(row, "source_clean")), bool(detail(row, "clean")))
        for row in rows
        if row.get("error") is None and detail(row, "source_clean") is not None
    ]
    if not pairs:
        return {}
    flagged_clean = sum(1 for source, tools in pairs if source and not tools)
    missed = sum(1 for source, tools in pairs if not source and tools)
    agreement = {
        "n": len(pairs),
        "agree": len(pairs) - flagged_clean - missed,
        "source_misconfigured_tools_clean": missed,
        "source_clean_tools_flag": flagged_clean,
    }
    note = (
        f"the source's label and the tools' verdict agree on {agreement['agree']} of {len(pairs)} files "
        f"(source misconfigured, no tool finding: {missed}; source clean, a tool finding: {flagged_clean})"
    )
    return {"label_agreement": agreement, "table_notes": [note]}


def user_config_row(row: Row) -> Row:
    """A user's row: the dataset's own `{id, filename, content, expected?, clean?}`, or the
    common shape with the file's text as `question`, `info.filename`, and as `answer`
    "clean", "misconfigured" (findings in `info.expected`, if known) or the expected
    findings themselves (`{tool: [rule ids]}`). Checked by the dataset reader's own rules."""
    from sv_env_config_verification.dataset import DatasetError, _example

    if "content" in row or "filename" in row:
        record = row
    else:
        info = row.get("info", row.get("meta")) or {}
        if not isinstance(info, dict):
            raise ValueError("'info'/'meta' must be an object")
        answer = row.get("answer")
        expected = info.get("expected") or {}
        if isinstance(answer, dict):
            expected, clean = answer, not any(answer.values())
        elif isinstance(answer, str) and answer.strip().lower() in ("clean", "misconfigured"):
            clean = answer.strip().lower() == "clean"
        else:
            raise ValueError(f"answer {answer!r} is not 'clean', 'misconfigured' or an object of tool -> [rule ids]")
        record = {
            "id": row.get("id"),
            "filename": info.get("filename"),
            "content": row.get("question"),
            "expected": {} if clean else expected,
            "clean": clean,
            "description": str(info.get("description", "")),
        }
    try:
        example = _example(record, "row")
    except DatasetError as exc:
        raise ValueError(str(exc).removeprefix("row: ")) from None
    return {**example.to_record(), "sample": False}


ENVIRONMENT = Environment(
    short="e2",
    env_id="sv-env-config-verification",
    module="sv_env_config_verification",
    description="Kubernetes/Terraform config verification (OPA/Rego, Semgrep, Checkov, KubeLinter)",
    heuristic=heuristic_reply,
    # The tool layer loads regopy and the scanners' cache: only when the oracle answers.
    oracle=LazyFunction("sv_env_config_verification.baseline:oracle_reply"),
    parse=parse_completion,
    rates=RATES,
    columns=(
        ("mean reward", "mean_reward"),
        ("finding F1", "finding_f1"),
        ("patch success", "patch_success"),
        ("clean pass", "clean_pass"),
        ("grounding", "grounding"),
        ("errors", "n_errors"),
    ),
    summary_extra=label_agreement,
    sample_note="hand-written manifests and Terraform files",
    tool_versions=LazyFunction("sv_env_config_verification.tools:tool_versions"),
    tool_cache_stats=LazyFunction("sv_env_config_verification.tools:tool_cache_stats"),
    tool_reward="grounding",
    load_reward_settings=load_reward_settings,
    write_bundled_dataset=LazyFunction("sv_env_config_verification.dataset:write_bundled_dataset"),
    synthetic=SYNTHETIC,
    corpora=CORPORA,
    sft=SFT,
    canonical_text=canonical_config,
    user_row=user_config_row,
    user_shapes='{"id", "filename", "content", "expected"?, "clean"?} or {"question": "<file text>", "answer": "clean"|"misconfigured"|{tool: [rule ids]}, "info": {"filename": ...}}',
)
