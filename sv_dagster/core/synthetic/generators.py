"""Adapters from the common pipeline (`batch.RowGenerator`) to each environment package's
`synthetic` module (E2-E6; E1's columnar batch is `e1.py`). The packages generate and
label; the adapters add schema validation in the environment's own terms and the tags the
metadata counts."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from sv_dagster.core.synthetic.batch import Outcome, Reject


def _schema(row: dict[str, Any], allowed: Sequence[str]) -> str | None:
    """The common research-JSONL row ({id, question, answer, info}) as sv_shared's reader
    checks it."""
    if not isinstance(row.get("id"), str) or not row["id"]:
        return "'id' must be a non-empty string"
    if not isinstance(row.get("question"), str) or not row["question"].strip():
        return "missing or empty 'question'"
    if row.get("answer") not in allowed:
        return f"answer {row.get('answer')!r} not one of {list(allowed)}"
    if not isinstance(row.get("info"), dict):
        return "'info' must be an object"
    return None


class _RowCandidates:
    """Candidates that are already research-JSONL rows (E4, E6): the package's `synthetic`
    module (`self.s`) words and parses the model's variation."""

    s: Any

    def candidate_id(self, candidate: Any) -> str:
        return candidate["id"]

    def variation_prompt(self, candidate: Any) -> str | None:
        return self.s.variation_prompt(candidate)

    def vary(self, candidate: Any, text: str, new_id: str, rng: random.Random) -> Any:
        return self.s.parse_variation(candidate, text, new_id)


class E2Generator:
    env = "e2"
    verifier = "E2 tools: OPA/Rego (in-process), Semgrep and Checkov (batched)"

    def __init__(self, seeds: Sequence[Any], *, clean_share: float = 0.25, tools: Sequence[str] | None = None) -> None:
        from sv_env_config_verification import synthetic

        self.s = synthetic
        self.seeds = list(seeds)
        self.clean_share = clean_share
        self.tools = tools
        self.generator_id = f"{synthetic.GENERATOR_ID}@{synthetic.GENERATOR_VERSION}"

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]:
        candidates, rejects = self.s.generate(n, rng, self.seeds, id_prefix=id_prefix, clean_share=self.clean_share)
        return candidates, [Reject(r["id"], r["stage"], r["reason"], source=r.get("source")) for r in rejects]

    def candidate_id(self, candidate: Any) -> str:
        return candidate.row["id"]

    def variation_prompt(self, candidate: Any) -> str | None:
        return self.s.variation_prompt(candidate.row)

    def vary(self, candidate: Any, text: str, new_id: str, rng: random.Random) -> Any:
        row = self.s.parse_variation(candidate.row, text, f"{rng.randrange(16**4):04x}")
        row["id"] = new_id
        return self.s.Candidate(row, None, candidate.mutation)

    def check(self, candidates: Sequence[Any]) -> list[Outcome]:
        from sv_env_config_verification.dataset import DatasetError, _example
        from sv_env_config_verification.tools import default_suite

        outcomes: list[Outcome | None] = []
        valid = []
        for candidate in candidates:
            try:
                _example(candidate.row, candidate.row.get("id", "?"))  # E2's own record check
            except DatasetError as exc:
                outcomes.append(Outcome(None, "validation", str(exc)))
                continue
            outcomes.append(None)
            valid.append(candidate)
        verdicts = iter(self.s.label_pairs(valid, default_suite(self.tools)))
        return [o if o is not None else self._verdict(c, next(verdicts)) for c, o in zip(candidates, outcomes)]

    @staticmethod
    def _verdict(candidate: Any, reason: str | None) -> Outcome:
        return Outcome(candidate.row, None, None) if reason is None else Outcome(None, "verification", reason)

    def tags_holder(self, row: dict[str, Any]) -> dict[str, Any]:
        return row["info"]

    def tags(self, row: dict[str, Any]) -> tuple[str, str, int]:
        return ("clean" if row["clean"] else "vulnerable", row["info"]["scenario"], row["info"]["difficulty"])

    def versions(self) -> dict[str, Any]:
        from sv_env_config_verification.tools import default_suite

        return default_suite(self.tools).versions()


class E3Generator:
    env = "e3"
    verifier = "E3 harness: sandboxed pytest (bubblewrap), reference fix through verify(), Bandit + Semgrep"

    def __init__(self, *, workers: int | None = None) -> None:
        from sv_env_code_vulnerability import synthetic

        self.s = synthetic
        self.workers = workers
        self.generator_id = f"{synthetic.GENERATOR_ID}@{synthetic.GENERATOR_VERSION}"

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]:
        tasks, rejects = self.s.generate(n, rng, id_prefix=id_prefix)
        return tasks, [Reject(r["id"], r["stage"], r["reason"]) for r in rejects]

    def candidate_id(self, candidate: Any) -> str:
        return candidate.id

    def variation_prompt(self, candidate: Any) -> str | None:
        return self.s.variation_prompt(candidate)

    def vary(self, candidate: Any, text: str, new_id: str, rng: random.Random) -> Any:
        return self.s.parse_variation(candidate, text, new_id, rng)

    def check(self, candidates: Sequence[Any]) -> list[Outcome]:
        from sv_env_code_vulnerability.tasks import _validate

        problems = [_validate(task, task.id) for task in candidates]  # E3's own task check
        valid = [task for task, p in zip(candidates, problems) if not p]
        checks = iter(self.s.validate_tasks(valid, workers=self.workers)) if valid else iter(())
        out = []
        for task, p in zip(candidates, problems):
            if p:
                out.append(Outcome(None, "validation", "; ".join(p)))
                continue
            check = next(checks)
            out.append(Outcome(self.s.task_row(task, check)) if check.reason is None
                       else Outcome(None, "verification", check.reason))
        return out

    def tags_holder(self, row: dict[str, Any]) -> dict[str, Any]:
        return row["meta"]

    def tags(self, row: dict[str, Any]) -> tuple[str, str, int]:
        return (row["cwe"], row["meta"]["scenario"], row["meta"]["difficulty"])

    def versions(self) -> dict[str, Any]:
        from sv_env_code_vulnerability import tool_versions

        return tool_versions()


class E4Generator(_RowCandidates):
    env = "e4"

    def __init__(self) -> None:
        from sv_env_phishing_detection import synthetic

        self.s = synthetic
        self.generator_id = f"{synthetic.GENERATOR_ID}@{synthetic.GENERATOR_VERSION}"
        self.verifier = synthetic.VERIFIER_ID

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]:
        return self.s.generate(n, rng, id_prefix=id_prefix), []

    def check(self, candidates: Sequence[Any]) -> list[Outcome]:
        from sv_env_phishing_detection.emails import GOLD_LABELS

        out = []
        for row in candidates:
            problem = _schema(row, GOLD_LABELS)
            if problem:
                out.append(Outcome(None, "validation", problem))
                continue
            reason = self.s.label_row(row)
            out.append(Outcome(row) if reason is None else Outcome(None, "verification", reason))
        return out

    def tags_holder(self, row: dict[str, Any]) -> dict[str, Any]:
        return row["info"]

    def tags(self, row: dict[str, Any]) -> tuple[str, str, int]:
        return (row["answer"], f"{row['info']['scenario']}/{row['info']['language']}", row["info"]["difficulty"])

    def versions(self) -> dict[str, Any]:
        import tldextract

        return {"evidence": self.verifier, "tldextract": getattr(tldextract, "__version__", "unknown"),
                "baseline": "sv_env_phishing_detection.baseline.classify_email"}


def _classifier_for(package: Any) -> Any:
    from sv_shared.redteam import make_classifier

    return make_classifier(package.load_reward_settings(None).classifier)


class E5Generator:
    env = "e5"

    def __init__(self, roots: Sequence[Any], failures: Sequence[Any] = (), *, novelty_threshold: float = 0.6,
                 memory: Sequence[str] = ()) -> None:
        import sv_env_redteam_attack
        from sv_env_redteam_attack import synthetic

        self.s = synthetic
        self.roots = list(roots)
        self.failures = list(failures)
        self.novelty_threshold = novelty_threshold
        self.memory = [*(r.goal for r in self.roots), *memory]
        self.classifier = _classifier_for(sv_env_redteam_attack)
        self.generator_id = f"{synthetic.GENERATOR_ID}@{synthetic.GENERATOR_VERSION}"
        self.verifier = f"safety classifier {self.classifier.ident} (label check) + MinHash novelty < {novelty_threshold}"
        self._ids: dict[int, str] = {}

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]:
        nodes = self.s.grow(self.roots, n, rng, self.failures)
        for i, node in enumerate(nodes):
            self._ids[id(node)] = f"{id_prefix}-{i:05d}"
        return nodes, []

    def candidate_id(self, candidate: Any) -> str:
        return self._ids[id(candidate)]

    def variation_prompt(self, candidate: Any) -> str | None:
        return self.s.variation_prompt(candidate)

    def vary(self, candidate: Any, text: str, new_id: str, rng: random.Random) -> Any:
        node = self.s.parse_variation(candidate, text)
        self._ids[id(node)] = new_id
        return node

    def check(self, candidates: Sequence[Any]) -> list[Outcome]:
        memory = self.s.NoveltyMemory(self.memory)
        out = []
        for node in candidates:  # in order: each accepted goal joins the novelty memory
            row_id = self._ids[id(node)]
            behavior_id = "syn-" + row_id.split("-syn-", 1)[1]
            judged = self.s.build_row(node, self.classifier, row_id=row_id, behavior_id=behavior_id, memory=memory,
                                      novelty_threshold=self.novelty_threshold)
            if judged.row is not None:
                out.append(Outcome(judged.row))
                continue
            stage = "validation" if judged.reason.startswith(("not sanitized", "model text")) else "verification"
            out.append(Outcome(None, stage, judged.reason, judged.withheld))
        return out

    def tags_holder(self, row: dict[str, Any]) -> dict[str, Any]:
        return row["info"]

    def tags(self, row: dict[str, Any]) -> tuple[str, str, int]:
        return (row["answer"], "/".join(row["info"]["goal_tree"]["path"]), row["info"]["difficulty"])

    def versions(self) -> dict[str, Any]:
        return {"classifier": self.classifier.ident, "novelty": "sv_shared.redteam.minhash (64 permutations, word 3-grams)",
                "novelty_threshold": self.novelty_threshold}


class E6Generator(_RowCandidates):
    env = "e6"

    def __init__(self, attacks: Sequence[Any]) -> None:
        import sv_env_redteam_defense
        from sv_env_redteam_defense import synthetic

        self.s = synthetic
        self.attacks = list(attacks)
        self.classifier = _classifier_for(sv_env_redteam_defense)
        self.costs = sv_env_redteam_defense.load_reward_settings(None).costs
        self.generator_id = f"{synthetic.GENERATOR_ID}@{synthetic.GENERATOR_VERSION}"
        self.verifier = f"safety classifier {self.classifier.ident} (every turn) + E6 scoring of the rule defender"

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]:
        return self.s.generate(n, rng, self.attacks, id_prefix=id_prefix), []

    def check(self, candidates: Sequence[Any]) -> list[Outcome]:
        out = []
        for row in candidates:
            problem = _schema(row, ("refuse", "comply"))
            info = row.get("info") or {}
            turns, expect = info.get("turns"), info.get("expect")
            if problem is None and (not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns)):
                problem = "info.turns must be a non-empty list of strings"
            if problem is None and (not isinstance(expect, list) or len(expect) != len(turns)):
                problem = "info.expect must have one refuse/comply per turn"
            if problem:
                out.append(Outcome(None, "validation", problem))
                continue
            reason = self.s.label_row(row, self.classifier, self.costs)
            out.append(Outcome(row) if reason is None else Outcome(None, "verification", reason))
        return out

    def tags_holder(self, row: dict[str, Any]) -> dict[str, Any]:
        return row["info"]

    def tags(self, row: dict[str, Any]) -> tuple[str, str, int]:
        return (row["answer"], row["info"]["scenario"], row["info"]["difficulty"])

    def versions(self) -> dict[str, Any]:
        return {"classifier": self.classifier.ident, "defender_baseline": "sv_env_redteam_defense.baseline.defender_reply",
                "costs": dict(self.costs)}
