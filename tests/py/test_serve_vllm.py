"""The scale-out path: the client checks of tests/py/serve_checks.py (the ones
test_serve.py runs against `python -m cfgmask serve`) against vLLM's own
OpenAI-compatible server,

    vllm serve MODEL --logits-processors cfgmask.vllm:CfgmaskLogitsProcessor

started by this test on a loopback port: chat, streamed chat, completion,
streamed completion and the text after the cursor (vllm_xargs.cfgmask_suffix),
each request naming its store by path (cfgmask_store), the field both servers
read.  vLLM does not steer a text to its end when max_tokens is spent, so an
answer cut there must be a prefix of the language; one that ended must be in
it (and compile, and parse in SQLite).

The model is SmolLM2-135M-Instruct's GGUF ($CFGMASK_TOK_SMOLLM2, vLLM reads
GGUF files and their tokenizer), or $CFGMASK_VLLM_MODEL with
$CFGMASK_VLLM_TOKENIZER (the tokenizer.json the stores are compiled with).

Runs in .venv-vllm (setup.sh with CFGMASK_VLLM=1 or CFGMASK_FULL=1; a missing
vLLM then fails, CFGMASK_REQUIRE_VLLM=1) and only on a machine with a CUDA
GPU, since PyPI's vLLM serves on CUDA: elsewhere it skips, saying so.
"""
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

if os.environ.get("CFGMASK_REQUIRE_VLLM") != "1":
    pytest.importorskip("vllm", reason="vLLM is not installed (setup.sh installs it in .venv-vllm)")
torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("vllm serve needs a CUDA GPU (PyPI's vLLM is built for CUDA)",
                allow_module_level=True)
openai = pytest.importorskip("openai", reason="the openai package is not installed")

import cfgmask  # noqa: E402
import serve_checks as checks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL = os.environ.get("CFGMASK_VLLM_MODEL") or os.environ.get("CFGMASK_TOK_SMOLLM2", "")
TOKENIZER = os.environ.get("CFGMASK_VLLM_TOKENIZER") or MODEL
MAX_TOKENS = 128


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("stores")
    out = {}
    for name, start in (("python", "file_input"), ("json", "")):
        path = d / f"{name}.cfgm"
        store = cfgmask.compile_grammar(str(ROOT / f"grammar/lark/{name}.lark"), TOKENIZER,
                                        start=start)
        store.save(str(path))
        out[name] = (str(path), store)
    return out


@pytest.fixture(scope="module")
def client(stores, tmp_path_factory):
    if not os.path.isfile(MODEL) and not os.path.isdir(MODEL):
        pytest.fail(f"no model {MODEL!r}: set CFGMASK_TOK_SMOLLM2 or CFGMASK_VLLM_MODEL")
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    vllm = os.path.join(os.path.dirname(sys.executable), "vllm")
    cmd = [vllm, "serve", MODEL, "--host", "127.0.0.1", "--port", str(port),
           "--logits-processors", "cfgmask.vllm:CfgmaskLogitsProcessor",
           "--max-model-len", "2048", "--gpu-memory-utilization", "0.5", "--seed", "0"]
    if TOKENIZER != MODEL:
        cmd += ["--tokenizer", os.path.dirname(TOKENIZER)]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while True:
            if proc.poll() is not None:
                pytest.fail("vllm serve exited:\n" + log.read_text()[-4000:])
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("vllm serve did not become ready:\n" + log.read_text()[-4000:])
            time.sleep(2)
        c = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=600)
        c.served = c.models.list().data[0].id
        yield c
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.parametrize("stream", [False, True])
def test_chat(client, stores, stream):
    path, store = stores["python"]
    checks.chat(client, client.served, path, "python", MAX_TOKENS, stream=stream, cut_ok=store)


@pytest.mark.parametrize("stream", [False, True])
def test_completion(client, stores, stream):
    path, store = stores["json"]
    checks.completion(client, client.served, path, "json", "A JSON object describing a cat:\n",
                      MAX_TOKENS, stream=stream, cut_ok=store)


def test_fim_cfgmask_suffix(client, stores):
    path, store = stores["python"]
    checks.fim_by_cfgmask_suffix(client, client.served, path, MAX_TOKENS, cut_ok=store)


def test_bad_request_is_400_with_one_line(client):
    with pytest.raises(openai.BadRequestError, match="cfgmask: "):
        client.completions.create(model=client.served, prompt="x", max_tokens=4, extra_body={
            "vllm_xargs": {"cfgmask_store": "/nonexistent/store.cfgm"}})
