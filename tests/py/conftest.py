"""Shared fixtures for the Python-side grammar tests.

Corpora are rebuilt in a temporary directory for every session (SQL: < 1 s,
JSON: a few seconds with the small caps below) unless CFGMASK_CORPUS_DIR names
a directory that already holds them (e.g. .cache/corpus built by the set-up
script), in which case that one is used as is.
"""
from __future__ import annotations

import io
import logging
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GRAMMAR_DIR = ROOT / "grammar" / "lark"
CORPUS_SCRIPTS = ROOT / "tests" / "corpus"
if str(CORPUS_SCRIPTS) not in sys.path:
    sys.path.insert(0, str(CORPUS_SCRIPTS))

import harvest_sql  # noqa: E402
import json_corpus  # noqa: E402

# caps for the session's own JSON corpus (keeps the run well under a minute)
JSON_MAX_BYTES = 16 * 1024
JSON_MAX_DOCS = 300


def load_lark(path: Path, debug: bool = False):
    """Lark(path) as the contract loads it; returns (parser, log text)."""
    from lark import Lark, logger
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    old_level = logger.level
    old_handlers = list(logger.handlers)
    for h in old_handlers:
        logger.removeHandler(h)
    logger.addHandler(handler)
    if debug:
        logger.setLevel(logging.DEBUG)
    try:
        parser = Lark(path.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                      start="start", debug=debug)
    finally:
        logger.removeHandler(handler)
        for h in old_handlers:
            logger.addHandler(h)
        logger.setLevel(old_level)
    return parser, buf.getvalue()


def accepts(parser, text: str) -> bool:
    from lark.exceptions import LarkError
    try:
        parser.parse(text)
        return True
    except LarkError:
        return False


@pytest.fixture(scope="session")
def sql_parser():
    return load_lark(GRAMMAR_DIR / "sql.lark")[0]


@pytest.fixture(scope="session")
def json_parser():
    return load_lark(GRAMMAR_DIR / "json.lark")[0]


def _given_corpus():
    d = os.environ.get("CFGMASK_CORPUS_DIR")
    return Path(d) if d else None


@pytest.fixture(scope="session")
def sql_corpus(tmp_path_factory):
    """List of (name, statement, source) from the harvested valid SQL."""
    import json
    given = _given_corpus()
    if given and (given / "sql" / "manifest.json").exists():
        root = given / "sql"
    else:
        out = tmp_path_factory.mktemp("corpus")
        harvest_sql.harvest(out, quiet=True)
        root = out / "sql"
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    return [(e["file"], (root / e["file"]).read_text(encoding="utf-8"), e["source"])
            for e in manifest["valid"]]


@pytest.fixture(scope="session")
def json_corpus_docs(tmp_path_factory):
    """(valid, invalid): lists of (name, text) from the JSON corpus."""
    import json
    given = _given_corpus()
    if given and (given / "json" / "manifest.json").exists():
        root = given / "json"
    else:
        out = tmp_path_factory.mktemp("corpus")
        json_corpus.build(out, JSON_MAX_BYTES, JSON_MAX_DOCS, quiet=True)
        root = out / "json"
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))

    def read(kind):
        return [(e["file"], (root / e["file"]).read_bytes().decode("utf-8")) for e in manifest[kind]]
    return read("valid"), read("invalid")
