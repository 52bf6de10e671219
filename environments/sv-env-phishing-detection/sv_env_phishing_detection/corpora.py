"""E4's corpora: emails labelled phishing or legitimate, from RFC 822 messages (the
SpamAssassin public corpus, by default; APWG reports) or tables (Enron ham, the Kaggle phishing
CSV), rendered as the taskset renders them."""

import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sv_env_phishing_detection.emails import canonical_text, normalize_email, render_email_question
from sv_env_phishing_detection.rfc822 import links_in, parse_rfc822
from sv_shared.bounded import InputRefused, ParserFailed
from sv_shared.corpora import (
    CorpusSpec,
    Item,
    Normalised,
    Normalizer,
    SourceSpec,
    column,
    labels_of,
    qa_schema,
    records,
    refs,
    reject,
    short_hash,
    text_of,
)


def _item(spec: SourceSpec, raw_email: dict[str, Any], label: str, ref: str) -> Item | dict[str, Any]:
    mail, notes = normalize_email(raw_email)
    if "empty email" in notes:
        return reject(spec.id, ref, "empty email (no sender, subject, body, links or attachments)")
    question = render_email_question(mail)
    info = {"email": mail, "scenario": spec.id, "source": spec.id, "sample": False}
    if notes:
        info["notes"] = notes
    return Item(
        "e4",
        {"id": f"{spec.id}-{short_hash(question)}", "question": question, "answer": label, "info": info},
        spec.id,
        ref,
    )


def _add(result: Normalised, made: Item | dict[str, Any]) -> None:
    if isinstance(made, Item):
        result.items.append(made)
    else:
        result.rejects.append(made)


def emails(spec: SourceSpec, frame: Any) -> Normalised:
    """Emails from table columns (`columns`: from, reply_to, to, subject, body); links are the
    URLs in the body, so evidence can be checked against what the model saw."""
    result = Normalised()
    where = refs(frame)
    assert spec.label is not None
    raw_labels = frame[spec.label.column] if spec.label.column else None
    labels, dropped = labels_of(raw_labels if raw_labels is not None else [None] * len(frame), spec.label)
    cols = {name: column(frame, spec, name) for name in ("from", "reply_to", "to", "subject", "body")}
    for i in range(len(frame)):
        if dropped[i]:
            result.n_filtered += 1
            continue
        label = labels[i]
        if label is None:
            raw = raw_labels.iloc[i] if raw_labels is not None else None
            result.rejects.append(reject(spec.id, where[i], f"unusable label {raw!r}"))
            continue
        raw = {name: text_of(col.iloc[i]) for name, col in cols.items() if col is not None}
        raw["links"] = links_in(raw.get("body", ""))
        _add(result, _item(spec, raw, label, where[i]))
    return result


EML_OPTIONS = (
    "max_message_chars",
    "max_body_bytes",
    "max_links",
    "max_link_chars",
    "near_duplicate_jaccard",
    "parse_workers",
)
"""max_message_chars: characters of a raw message read (the rest is cut before parsing);
max_body_bytes: UTF-8 bytes of its text body kept, cut at a character boundary (bytes, not
characters, bound the tokens a model reads: SmolLM2's tokenizer spends about 2 tokens on a
CJK character, 3 bytes, and a quarter token on an English one); max_links: links kept (the
prompt lists each one); max_link_chars: characters of each link kept (tracking URLs run to a
thousand; host and path come first). Every cut is noted in the row's `info.notes`;
`emails.BODY_CAP` bounds the body in any case. near_duplicate_jaccard: a message whose subject
and body (`emails.canonical_text`) have at least this token Jaccard with a message kept before
it is left out by design, so the hash splitter cannot put near duplicates in train and test
(the leakage check's test; configs/leakage.yaml's threshold); parse_workers: messages parsed
at once, each in a bounded worker process (default 2)."""


def cut_utf8(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, at a character boundary."""
    data = text.encode("utf-8", errors="surrogatepass")
    return text if len(data) <= limit else data[:limit].decode("utf-8", errors="ignore")


def _positive_int(spec: SourceSpec, name: str, default: int | None) -> int | None:
    value = spec.options.get(name, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"source {spec.id}: {name} must be a whole number of at least 1, got {value!r}")
    return value


class NearDuplicates:
    """Admits a message unless its canonical text nearly duplicates one admitted before:
    MinHash LSH proposes candidates generously below the threshold and the exact token
    Jaccard decides, as the leakage check does (tokens: lower-cased, split on whitespace)."""

    NUM_PERM = 128
    LSH_MARGIN = 0.2

    def __init__(self, threshold: float | None) -> None:
        self.threshold = threshold
        self.kept: dict[str, set[str]] = {}
        self.hashes: dict[str, int] = {}
        self.lsh: Any = None
        self.template: Any = None
        if threshold is not None:
            from datasketch import MinHash, MinHashLSH

            self.lsh = MinHashLSH(
                threshold=max(0.1, threshold - self.LSH_MARGIN), num_perm=self.NUM_PERM, weights=(0.2, 0.8)
            )
            self.template = MinHash(num_perm=self.NUM_PERM, seed=1)  # its permutations, drawn once

    def _hash(self, word: str) -> int:  # words repeat across messages: hash each once
        value = self.hashes.get(word)
        if value is None:
            digest = hashlib.sha1(word.encode("utf-8", errors="surrogatepass")).digest()
            value = self.hashes[word] = int.from_bytes(digest[:4], "little")
        return value

    def admit(self, key: str, text: str) -> bool:
        if self.lsh is None or self.threshold is None:
            return True
        from datasketch import MinHash

        words = set(text.lower().split())
        if not words:
            return True
        template = self.template
        signature = MinHash(
            num_perm=self.NUM_PERM,
            seed=1,
            hashfunc=self._hash,
            permutations=template.permutations,
            scheme=template.scheme,
        )
        signature.update_batch(list(words))
        for candidate in self.lsh.query(signature):
            other = self.kept[candidate]
            if len(words & other) / len(words | other) >= self.threshold:
                return False
        if key not in self.kept:
            self.lsh.insert(key, signature)
            self.kept[key] = words
        return True


def _near_duplicate_jaccard(spec: SourceSpec) -> float | None:
    value = spec.options.get("near_duplicate_jaccard")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1):
        raise ValueError(f"source {spec.id}: near_duplicate_jaccard must be within (0, 1], got {value!r}")
    return None if value is None else float(value)


def _parse_one(text: str, cap: int | None) -> tuple[dict[str, Any] | None, list[str], str | None]:
    """(fields, notes, reason it is unusable) of one raw message, cut to `cap` characters."""
    notes = []
    if cap is not None and len(text) > cap:
        notes.append(f"message cut from {len(text)} to {cap} characters before parsing")
        text = text[:cap]
    try:
        return parse_rfc822(text), notes, None
    except InputRefused as exc:
        return None, notes, f"email refused: {exc}"
    except ParserFailed as exc:  # the email package raises many types on broken messages
        return None, notes, f"not a parsable email ({exc.kind}: {exc.detail[:100]})"


def eml(spec: SourceSpec, frame: Any) -> Normalised:
    """RFC 822 messages (one {path, text} row each: .eml files, a mail corpus's members):
    headers, the text body (plain, else HTML as text), links and attachment names. The label
    is the source's constant (`label.value`) or its column's (SpamAssassin's: the split, from
    the message's folder); each row records its split as `info.group` and where it came from
    (`info.origin`: file, member path and sha256 where the corpus gives one)."""
    result = Normalised()
    assert spec.label is not None
    message_cap = _positive_int(spec, "max_message_chars", None)
    body_cap = _positive_int(spec, "max_body_bytes", None)
    link_cap = _positive_int(spec, "max_links", None)
    link_chars = _positive_int(spec, "max_link_chars", None)
    workers = _positive_int(spec, "parse_workers", 2) or 2
    apart = NearDuplicates(_near_duplicate_jaccard(spec))
    where = refs(frame)
    # `_split` and `member_sha256` come from multi-folder packages (SpamAssassin's); a folder or
    # .zip of .eml files has neither.
    columns = ["path", "text"] + [c for c in ("_split", "member_sha256") if c in frame.columns]
    rows = records(frame[columns])
    raw_labels = frame[spec.label.column] if spec.label.column else None
    labels, dropped = labels_of(raw_labels if raw_labels is not None else [None] * len(frame), spec.label)
    with ThreadPoolExecutor(max_workers=workers) as pool:  # each thread waits on its own worker process
        parsed = pool.map(lambda row: _parse_one(text_of(row["text"]), message_cap), rows)
        for i, (row, (raw, notes, problem)) in enumerate(zip(rows, parsed, strict=True)):
            ref = f"{where[i]} ({row['path']})"
            if dropped[i]:
                result.n_filtered += 1
                continue
            if (gold := labels[i]) is None:
                label = raw_labels.iloc[i] if raw_labels is not None else None
                result.rejects.append(reject(spec.id, ref, f"unusable label {label!r}"))
                continue
            if raw is None:
                result.rejects.append(reject(spec.id, ref, problem or "unparsable email"))
                continue
            body = text_of(raw.get("body"))
            if body_cap is not None and (cut := cut_utf8(body, body_cap)) != body:
                notes.append(f"body cut from {len(body)} to {len(cut)} characters ({body_cap} UTF-8 bytes)")
                raw["body"] = cut
            links = list(raw.get("links") or [])
            if link_cap is not None and len(links) > link_cap:
                notes.append(f"links cut from {len(links)} to {link_cap}")
                links = links[:link_cap]
            if link_chars is not None and any(len(link) > link_chars for link in links):
                long = sum(len(link) > link_chars for link in links)
                notes.append(f"{long} link(s) cut to {link_chars} characters")
                links = list(dict.fromkeys(link[:link_chars] for link in links))
            raw["links"] = links
            made = _item(spec, raw, gold, ref)
            if isinstance(made, Item):
                info = made.record["info"]
                if not apart.admit(made.record["id"], canonical_text(info["email"])):
                    result.n_filtered += 1
                    continue
                if row.get("_split") is not None:
                    info["group"] = str(row["_split"])
                info["origin"] = {"file": where[i], "member": row["path"]}
                if row.get("member_sha256"):
                    info["origin"]["member_sha256"] = row["member_sha256"]
                if notes:
                    info["notes"] = [*notes, *info.get("notes", [])]
            _add(result, made)
    return result


CORPORA = CorpusSpec(
    normalizers={"e4_emails": Normalizer(emails), "e4_eml": Normalizer(eml, EML_OPTIONS)},
    schema=qa_schema("e4", ("Phishing", "Legitimate")),
    test_sources=("corpora", "bundled"),
    note="Default test rows: the SpamAssassin public corpus (spam counts as Phishing); test_source 'bundled' "
    "scores the package's generated emails in English, German, Spanish and French instead.",
)
