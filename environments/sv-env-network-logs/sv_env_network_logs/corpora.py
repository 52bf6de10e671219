"""E1's corpora: network flows (IoT-23, CIC-IDS-2017, UNSW-NB15 as OOD) normalised to Zeek
conn.log fields and curated column by column (`flow_curation`, which imports pandas; named
lazily so discovering the environments stays fast). Its test split is the corpus rows in the
test hash bucket."""

from sv_env_network_logs.flows import GOLD_LABELS
from sv_shared.corpora import CorpusSpec, Normalizer, qa_schema
from sv_shared.environment import LazyFunction

CORPORA = CorpusSpec(
    normalizers={"e1_flows": Normalizer(LazyFunction("sv_env_network_logs.flow_curation:normalise_flows"))},
    schema=qa_schema("e1", GOLD_LABELS),
    test_sources=("corpora",),
    curate=LazyFunction("sv_env_network_logs.flow_curation:curate"),
)
