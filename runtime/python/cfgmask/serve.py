"""python -m cfgmask serve: an OpenAI-compatible HTTP endpoint with a grammar per request.

    python -m cfgmask serve --model MODEL.gguf [--store NAME=PATH ...]
        [--allow-store-dir DIR ...] [--host 127.0.0.1] [--port 8000] [--parallel 2]

The server is llama-cpp-python's own (``llama_cpp.server``: FastAPI, uvicorn,
server-sent events, its request types, chat templates, authentication and
extra routes).  This module replaces its two generation routes,
``/v1/completions`` and ``/v1/chat/completions``, by ones that put a
:class:`~cfgmask.processors.LlamaCppLogitsProcessor` into each request that
asks for a grammar, and serves requests on a pool of ``--parallel`` model
contexts (one ``llama_cpp.Llama`` each, the weights mapped once by the page
cache), so that that many requests generate at once; the others wait for a
free context.

A request asks for a grammar with the fields of cfgmask's vLLM logits
processor (cfgmask/vllm.py), under ``vllm_xargs`` in the request body (the
``openai`` client's ``extra_body``), so that one client works against both:

- ``cfgmask_grammar``: a name: ``python`` (grammar/lark/python.lark, start
  ``file_input``), ``sql``, ``json`` (compiled with the model's vocabulary on
  first use and kept in ``--cache-dir``), or a store registered with
  ``--store NAME=PATH``;
- ``cfgmask_store``: a registered name, or the path of a store file that the
  operator allowed (a registered store's file, or one under an
  ``--allow-store-dir`` folder);
- ``cfgmask_suffix``: the text after the cursor, set on the matcher as vLLM's
  processor does (the prompt goes to the model only).

``/v1/completions`` with the OpenAI ``suffix`` field is fill-in-the-middle:
the prompt (the text before the cursor) is fed to the grammar as well as to
the model, the suffix is set on the matcher (a stop token only where prompt +
middle + suffix is in the language), and the model reads the prompt and the
suffix in its FIM template (cfgmask/fim.py, from its special tokens; a model
without FIM tokens reads the prefix alone).

Stores are loaded once, mapped (``CFGMASK_STORE_OPEN=map``, ``--store-open``),
and shared by all requests; each request has its own matcher.  A constrained
request whose ``max_tokens`` is spent is steered to its end for at most
``--steer-tokens`` more tokens (the processor's ``steer_to_end``), so its text
is in the language unless even that does not reach an end (finish_reason
``length``).  ``usage`` gains the timings: ``mask_us_per_token`` (accepting
tokens and masking, inside the processor; ``mask_ms`` in all, ``steer_ms`` of
it on steered steps, the search for a shortest completion included;
``dead_end`` when that search found none) beside
``model_us_per_token`` (llama.cpp's own decoding time per token),
``prompt_ms`` (its prompt evaluation), ``total_ms``.

A bad request gets HTTP 400 with one line ``cfgmask: ...`` (OpenAI's error
shape); nothing a request sends stops the server.  docs/serving.md has
examples; tests/py/test_serve.py drives it with the ``openai`` client.
"""

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import socket
import sys
import threading
import time
from collections import OrderedDict
from functools import partial
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import Error, GrammarMatcher, Store, _core, compile_grammar
from . import fim
from .processors import LlamaCppLogitsProcessor

ARG_KEYS = ("cfgmask_grammar", "cfgmask_store", "cfgmask_suffix")
# vLLM's keys that compile a grammar per request; refused here (register it instead).
_COMPILE_KEYS = ("cfgmask_tokenizer", "cfgmask_start")
BUILTIN_GRAMMARS = {"python": ("python.lark", "file_input"), "sql": ("sql.lark", ""),
                    "json": ("json.lark", "")}
MAX_CACHED_PATH_STORES = 16
_GEN_PATHS = ("/v1/completions", "/v1/chat/completions", "/v1/engines/copilot-codex/completions")


class BadRequest(Exception):
    """A request the server refuses: HTTP 400 with this one-line message."""

    def __init__(self, message: str, param: Optional[str] = None):
        super().__init__(message if message.startswith("cfgmask: ") else "cfgmask: " + message)
        self.param = param


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def default_grammar_dir() -> Optional[str]:
    """The shipped grammars: inside the package (a wheel), else the checkout's grammar/lark."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.path.join(here, "grammars"),
              os.path.join(here, "..", "..", "..", "grammar", "lark")):
        if os.path.isfile(os.path.join(d, "python.lark")):
            return os.path.normpath(d)
    return None


class ModelVocab:
    """The served model's vocabulary, read once: each token's bytes, and the
    tokens that end generation.  A store is served only if it was compiled
    for exactly this vocabulary."""

    def __init__(self, llm):
        import llama_cpp
        from .generate import token_piece
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self.size = llm.n_vocab()
        self.pieces = [token_piece(llm, t) for t in range(self.size)]
        self.eog = {t for t in range(self.size) if llama_cpp.llama_vocab_is_eog(vocab, t)}

    def mismatch(self, store: Store) -> Optional[str]:
        """None if `store` was compiled for this vocabulary, else what differs."""
        if store.vocab_size != self.size:
            return f"vocabulary sizes differ: model {self.size}, store {store.vocab_size}"
        for t in range(self.size):
            if not store.is_special(t) and store.token_bytes(t) != self.pieces[t]:
                return (f"token {t}: model {self.pieces[t]!r}, "
                        f"store {store.token_bytes(t)!r}")
        for t in store.eos_ids:
            if t not in self.eog:
                return f"the store's stop token {t} does not end generation for the model"
        return None


class Grammars:
    """The grammars a request may name, and the store files it may give:
    loaded (or compiled) once, checked against the model's vocabulary once,
    shared by every request."""

    def __init__(self, model_path: str, vocab: ModelVocab, named: Dict[str, str],
                 allow_dirs: List[str], grammar_dir: Optional[str], cache_dir: str):
        self.model_path = model_path
        self.vocab = vocab
        self.named_paths = dict(named)
        self.allow_dirs = [os.path.realpath(d) for d in allow_dirs]
        self.grammar_dir = grammar_dir
        self.cache_dir = cache_dir
        self._named: Dict[str, Store] = {}
        self._paths: "OrderedDict[tuple, Store]" = OrderedDict()
        self._lock = threading.Lock()

    def names(self) -> List[str]:
        builtin = list(BUILTIN_GRAMMARS) if self.grammar_dir else []
        return sorted(set(builtin) | set(self.named_paths))

    def load_registered(self) -> None:
        """Loads the --store stores at start; a bad one raises Error."""
        for name, path in self.named_paths.items():
            try:
                self._named[name] = self._checked(Store.load(path), f"--store {name}={path}")
            except (Error, BadRequest) as e:
                raise Error(str(e).removeprefix("cfgmask: ")) from None

    def _checked(self, store: Store, what: str) -> Store:
        bad = self.vocab.mismatch(store)
        if bad:
            raise BadRequest(f"{what}: the store was compiled for another vocabulary than "
                             f"the model's: {bad}")
        return store

    def by_name(self, name: str) -> Store:
        store = self._named.get(name)  # loaded: no wait behind a compile of another grammar
        if store is not None:
            return store
        with self._lock:
            store = self._named.get(name)
            if store is not None:
                return store
            if name in BUILTIN_GRAMMARS and self.grammar_dir and name not in self.named_paths:
                store = self._checked(self._compile_builtin(name), f"grammar {name!r}")
                self._named[name] = store
                return store
        raise BadRequest(f"unknown grammar {name!r} (known: {', '.join(self.names()) or 'none'}; "
                         "or cfgmask_store with an allowed store path)", "cfgmask_grammar")

    def _compile_builtin(self, name: str) -> Store:
        file, start = BUILTIN_GRAMMARS[name]
        grammar = os.path.join(self.grammar_dir, file)
        with open(grammar, "rb") as f:
            grammar_bytes = f.read()
        st = os.stat(self.model_path)
        h = hashlib.sha256()
        for part in (grammar_bytes, os.path.realpath(self.model_path).encode(),
                     f"{st.st_size}:{st.st_mtime_ns}".encode(), start.encode(),
                     str(_core.STORE_FORMAT_VERSION).encode()):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        path = os.path.join(self.cache_dir, f"{name}-{h.hexdigest()[:24]}.cfgm")
        if os.path.isfile(path):
            try:
                return Store.load(path)
            except Error:
                pass  # a damaged cache entry: compile again
        t0 = time.perf_counter()
        store = compile_grammar(grammar, self.model_path, start=start)
        _log(f"compiled grammar {name!r} in {time.perf_counter() - t0:.1f} s")
        try:
            os.makedirs(self.cache_dir, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            store.save(tmp)
            os.replace(tmp, path)
        except (OSError, Error) as e:  # the cache only saves the next start a compile
            _log(f"cannot keep the compiled store in {self.cache_dir}: {_one_line(e)}")
        return store

    def _allowed(self, real: str) -> bool:
        if any(real == os.path.realpath(p) for p in self.named_paths.values()):
            return True
        return any(real.startswith(d.rstrip(os.sep) + os.sep) for d in self.allow_dirs)

    def by_path(self, path: str) -> Store:
        real = os.path.realpath(path)
        if not self._allowed(real):
            raise BadRequest(f"store path {path!r} is not allowed (name a grammar: "
                             f"{', '.join(self.names()) or 'none'}; or give a store file the "
                             "server allows, --allow-store-dir)", "cfgmask_store")
        try:
            st = os.stat(real)
        except OSError as e:
            raise BadRequest(f"cannot read store {path!r}: {e.strerror}", "cfgmask_store") from None
        key = (real, st.st_mtime_ns, st.st_size)
        with self._lock:
            store = self._paths.get(key)
            if store is None:
                try:
                    store = Store.load(real)
                except Error as e:
                    raise BadRequest(_one_line(e), "cfgmask_store") from None
                store = self._checked(store, f"store {path!r}")
            self._paths[key] = store
            self._paths.move_to_end(key)
            while len(self._paths) > MAX_CACHED_PATH_STORES:
                self._paths.popitem(last=False)
        return store

    def resolve(self, args: Dict[str, str]) -> Tuple[str, Store]:
        if "cfgmask_grammar" in args:
            name = args["cfgmask_grammar"]
            return name, self.by_name(name)
        ref = args["cfgmask_store"]
        if ref in self.named_paths or (ref in BUILTIN_GRAMMARS and self.grammar_dir):
            return ref, self.by_name(ref)
        return ref, self.by_path(ref)


def request_args(raw: Dict[str, Any]) -> Optional[Dict[str, str]]:
    """The request's cfgmask arguments (``vllm_xargs``), checked; None if none."""
    xargs = raw.get("vllm_xargs")
    if xargs is None:
        return None
    if not isinstance(xargs, dict):
        raise BadRequest(f"vllm_xargs must be an object, got {type(xargs).__name__}", "vllm_xargs")
    mine = {k: v for k, v in xargs.items() if isinstance(k, str) and k.startswith("cfgmask_")}
    if not mine:
        return None
    for k, v in mine.items():
        if k in _COMPILE_KEYS:
            raise BadRequest(f"{k}: this server compiles no grammar per request; name a grammar "
                             "(cfgmask_grammar) or give an allowed store (cfgmask_store)", k)
        if k not in ARG_KEYS:
            raise BadRequest(f"unknown request argument {k!r} (known: {', '.join(ARG_KEYS)})", k)
        if not isinstance(v, str):
            raise BadRequest(f"{k} must be a string, got {type(v).__name__}", k)
    if "cfgmask_grammar" in mine and "cfgmask_store" in mine:
        raise BadRequest("give one of cfgmask_grammar (a name) and cfgmask_store (a name or "
                         "an allowed store path), not both", "cfgmask_store")
    if "cfgmask_grammar" not in mine and "cfgmask_store" not in mine:
        raise BadRequest("cfgmask_suffix needs a grammar: add cfgmask_grammar or cfgmask_store",
                         "cfgmask_suffix")
    return mine


def _position(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line}, column {col}"


def feed_prompt(matcher: GrammarMatcher, text: str, label: str) -> None:
    """Feeds the text before the cursor to the grammar, or says where it leaves it."""
    data = text.encode("utf-8", "surrogateescape")
    if matcher.accept_string(data):
        return
    lo, hi = 0, len(data)  # data[:lo] is a prefix of the language, data[:hi] is not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if matcher.fork().accept_string(data[:mid]):
            lo = mid
        else:
            hi = mid
    raise BadRequest(f"the prompt leaves grammar {label!r} at {_position(data, lo)} "
                     f"(byte {lo}: {data[lo:lo + 20]!r})", "prompt")


class RequestProcessor(LlamaCppLogitsProcessor):
    """cfgmask's processor for one request, or (without a matcher) a counter
    of the tokens sampled.  Once `max_tokens` tokens are generated, or the
    context would leave fewer than `steer_tokens` free, the text is steered
    to its end (stop tokens where the grammar allows one, else a shortest
    completion)."""

    def __init__(self, matcher: Optional[GrammarMatcher], max_tokens: Optional[int],
                 n_ctx: int, steer_tokens: int):
        self.constrained = matcher is not None
        if self.constrained:
            super().__init__(matcher)
        else:
            self.prompt_len = None
            self.mask_seconds = 0.0
            self.calls = 0
        self.max_tokens = max_tokens
        self.n_ctx = n_ctx
        self.steer_tokens = steer_tokens
        self.budget = None
        self.steered = False
        self.steer_seconds = 0.0  # the part of mask_seconds spent steering

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.prompt_len is None:
            self.prompt_len = len(input_ids)
            room = self.n_ctx - self.prompt_len - self.steer_tokens
            self.budget = room if self.max_tokens is None else min(self.max_tokens, room)
        if not self.constrained:
            self.calls += 1
            return scores
        if not self.steer_to_end and len(input_ids) - self.prompt_len >= self.budget:
            self.steer_to_end = self.steered = True
        if not self.steer_to_end:
            return super().__call__(input_ids, scores)
        before = self.mask_seconds
        out = super().__call__(input_ids, scores)
        self.steer_seconds += self.mask_seconds - before
        return out


@dataclasses.dataclass
class Plan:
    """What a request asks of cfgmask, checked before any model work."""

    label: Optional[str] = None         # the grammar's name or store path
    matcher: Optional[GrammarMatcher] = None
    prompt_ids: Optional[List[int]] = None  # FIM: the model's prompt, built here
    fim_template: Optional[str] = None
    include_usage: bool = False         # stream_options.include_usage


class LlamaPool:
    """`llms`, one per request at a time; a request waits for a free one."""

    def __init__(self, llms: list, aliases: List[str]):
        self.llms = llms
        self.aliases = aliases
        self._free = None

    @contextlib.asynccontextmanager
    async def slot(self):
        import asyncio
        if self._free is None:
            self._free = asyncio.Queue()
            for llm in self.llms:
                self._free.put_nowait(llm)
        llm = await self._free.get()
        try:
            yield _SlotProxy(llm, self.aliases)
        finally:
            self._free.put_nowait(llm)

    async def dependency(self):
        """Replaces llama_cpp.server's get_llama_proxy for its other routes."""
        async with self.slot() as proxy:
            yield proxy


class _SlotProxy:
    """The part of llama_cpp.server's LlamaProxy that its routes use."""

    def __init__(self, llm, aliases):
        self.llm = llm
        self.aliases = aliases

    def __call__(self, model: Optional[str] = None):
        return self.llm

    def __iter__(self):
        return iter(self.aliases)


def _perf(llm) -> Tuple[float, int, float, int]:
    import llama_cpp
    p = llama_cpp.llama_perf_context(llm.ctx)
    return p.t_p_eval_ms, p.n_p_eval, p.t_eval_ms, p.n_eval


def _timings(llm, proc: RequestProcessor, seconds: float, completion_tokens: int) -> Dict:
    p_ms, _, e_ms, n_eval = _perf(llm)
    out = {"total_ms": round(1e3 * seconds, 3), "prompt_ms": round(p_ms, 3),
           "model_ms": round(e_ms, 3),
           "model_us_per_token": round(1e3 * e_ms / n_eval, 1) if n_eval else 0.0}
    if proc.constrained:
        out["mask_ms"] = round(1e3 * proc.mask_seconds, 3)
        out["mask_us_per_token"] = round(1e6 * proc.mask_seconds / max(1, proc.calls), 1)
        out["steered"] = proc.steered
        out["steer_ms"] = round(1e3 * proc.steer_seconds, 3)
        # The search for a completion found none: the text sampled into one of
        # the dead ends the engine still allows (docs/exactness.md, "No dead
        # ends"); it cannot end, and finish_reason is "length".
        out["dead_end"] = proc.steer_failed
    return out


class Server:
    """The state the routes share: the model pool, the grammars, the options."""

    def __init__(self, args, llms: list, vocab: ModelVocab, grammars: Grammars):
        self.args = args
        self.pool = LlamaPool(llms, [args.alias or args.model])
        self.llm = llms[0]  # tokenizes (the vocabulary is read only) for any request
        self.vocab = vocab
        self.grammars = grammars
        self.n_ctx = self.llm.n_ctx()
        self.fim = fim.template_of_llama(self.llm)

    def plan(self, kind: str, body, raw: Dict[str, Any]) -> Plan:
        """Checks a request's cfgmask side and builds its matcher (BadRequest if bad)."""
        plan = Plan()
        opts = raw.get("stream_options")
        if opts is not None:
            if not isinstance(opts, dict):
                raise BadRequest("stream_options must be an object", "stream_options")
            plan.include_usage = bool(opts.get("include_usage"))
        args = request_args(raw)
        suffix = getattr(body, "suffix", None) if kind == "completion" else None
        if kind == "completion" and isinstance(body.prompt, list) and len(body.prompt) > 1:
            raise BadRequest("one prompt per request", "prompt")
        if args is None:
            if suffix is not None:
                raise BadRequest("a suffix (fill-in-the-middle) needs a grammar: add "
                                 "vllm_xargs.cfgmask_grammar or cfgmask_store", "suffix")
            return plan
        if suffix is not None and "cfgmask_suffix" in args:
            raise BadRequest("give the text after the cursor once: suffix or "
                             "vllm_xargs.cfgmask_suffix", "suffix")
        if body.grammar is not None:
            raise BadRequest("a cfgmask grammar and a llama.cpp grammar (grammar) in one "
                             "request", "grammar")
        if body.min_tokens:
            raise BadRequest("min_tokens does not go with a grammar: the grammar decides "
                             "where the text may end", "min_tokens")
        if kind == "chat" and body.response_format is not None and \
                body.response_format.get("type", "text") != "text":
            raise BadRequest("response_format does not go with a cfgmask grammar",
                             "response_format")
        if suffix is not None and body.echo:
            raise BadRequest("echo does not go with a suffix (fill-in-the-middle)", "echo")
        the_suffix = suffix if suffix is not None else args.get("cfgmask_suffix")
        if the_suffix is not None:
            n = len(the_suffix.encode("utf-8", "surrogateescape"))
            if n > _core.MAX_SUFFIX_BYTES:
                raise BadRequest(f"the suffix is {n:,} bytes, more than the "
                                 f"{_core.MAX_SUFFIX_BYTES:,} a request may give",
                                 "suffix" if suffix is not None else "cfgmask_suffix")
        plan.label, store = self.grammars.resolve(args)
        matcher = GrammarMatcher(store)
        try:
            if the_suffix:
                matcher.set_suffix(the_suffix)
        except Error as e:
            raise BadRequest(_one_line(e), "suffix") from None
        if suffix is not None:  # fill-in-the-middle: the prefix is the document's too
            prompt = body.prompt[0] if isinstance(body.prompt, list) else body.prompt
            prompt = prompt or ""
            feed_prompt(matcher, prompt, plan.label)
            plan.prompt_ids = fim.llama_prompt_ids(self.llm, self.fim, prompt, suffix)
            plan.fim_template = self.fim.describe() if self.fim else "none (prefix only)"
            if len(plan.prompt_ids) >= self.n_ctx:
                raise BadRequest(f"the FIM prompt is {len(plan.prompt_ids)} tokens, more than "
                                 f"the context of {self.n_ctx} holds", "suffix")
        plan.matcher = matcher
        return plan

    def prepare(self, kind: str, body, plan: Plan) -> Tuple[Dict, RequestProcessor]:
        """llama_cpp's keyword arguments for the request, with its processor."""
        import llama_cpp
        exclude = {"n", "best_of", "logit_bias_type", "user", "min_tokens"}
        kwargs = body.model_dump(exclude=exclude)
        if kind == "completion" and isinstance(kwargs["prompt"], list):
            kwargs["prompt"] = kwargs["prompt"][0] if kwargs["prompt"] else ""
        max_tokens = kwargs.get("max_tokens")
        if max_tokens is not None and max_tokens <= 0:
            max_tokens = None  # llama_cpp: up to the context's end
        proc = RequestProcessor(plan.matcher, max_tokens, self.n_ctx, self.args.steer_tokens)
        if plan.matcher is not None and max_tokens is not None:
            kwargs["max_tokens"] = max_tokens + self.args.steer_tokens
        if plan.prompt_ids is not None:
            kwargs["prompt"] = plan.prompt_ids
            kwargs["suffix"] = None  # llama_cpp's own FIM handling is not used
        kwargs["logits_processor"] = llama_cpp.LogitsProcessorList([proc])
        return kwargs, proc


def _bad(e: BadRequest):
    from fastapi.responses import JSONResponse
    return JSONResponse({"error": {"message": str(e), "type": "invalid_request_error",
                                   "param": e.param, "code": None}}, status_code=400)


def _reset_perf(llm) -> None:
    import llama_cpp
    llama_cpp.llama_perf_context_reset(llm.ctx)


def _run(llm, call, kwargs, proc: RequestProcessor, plan: Plan):
    """One request, not streamed, in a worker thread."""
    _reset_perf(llm)
    t0 = time.perf_counter()
    result = call(llm, **kwargs)
    usage = result.setdefault("usage", {})
    usage.update(_timings(llm, proc, time.perf_counter() - t0,
                          usage.get("completion_tokens", 0)))
    if plan.fim_template is not None:
        usage["fim_template"] = plan.fim_template
    return result


def _stream_usage(last: Optional[Dict], proc: RequestProcessor, llm, seconds: float,
                  plan: Plan) -> Dict:
    """The usage chunk of a stream (OpenAI's stream_options.include_usage)."""
    stopped = bool(last and last.get("choices") and
                   last["choices"][0].get("finish_reason") == "stop")
    completion = max(0, proc.calls - (1 if stopped else 0))
    prompt = proc.prompt_len or 0
    usage = {"prompt_tokens": prompt, "completion_tokens": completion,
             "total_tokens": prompt + completion}
    usage.update(_timings(llm, proc, seconds, completion))
    if plan.fim_template is not None:
        usage["fim_template"] = plan.fim_template
    chunk = {k: last[k] for k in ("id", "object", "created", "model") if last and k in last}
    chunk.update(choices=[], usage=usage)
    return chunk


def _llama_app(args):
    """llama_cpp.server's FastAPI app, less its own generation routes, and the
    model context it loaded."""
    from llama_cpp.server import app as lapp
    # Its routes leave its router before its app includes it (FastAPI may
    # include a router lazily, by reference).
    lapp.router.routes[:] = [r for r in lapp.router.routes
                             if getattr(r, "path", None) not in _GEN_PATHS]
    app = lapp.create_app(server_settings=args.server_settings,
                          model_settings=[args.model_settings])
    return app, lapp._llama_proxy(None)


def add_routes(app, server: Server) -> None:
    """cfgmask's /v1/completions and /v1/chat/completions, on the pool."""
    import anyio
    from fastapi import APIRouter, Depends, HTTPException, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from fastapi.routing import APIRoute
    from sse_starlette.sse import EventSourceResponse
    from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
    import llama_cpp
    from llama_cpp.server import app as lapp
    from llama_cpp.server.errors import RouteErrorHandler
    from llama_cpp.server.types import CreateChatCompletionRequest, CreateCompletionRequest

    app.dependency_overrides[lapp.get_llama_proxy] = server.pool.dependency
    class Route(RouteErrorHandler):
        """llama_cpp.server's error formatting (OpenAI's shape; a context
        overflow is a 400), but a body FastAPI cannot read stays FastAPI's
        422 (RouteErrorHandler reads the body again and fails with a 500)."""

        def get_route_handler(self):
            inner = APIRoute.get_route_handler(self)

            async def handler(request: Request):
                try:
                    return await inner(request)
                except (HTTPException, RequestValidationError):
                    raise
                except Exception as exc:  # noqa: BLE001 - formatted as llama_cpp.server does
                    body = None
                    with contextlib.suppress(Exception):
                        raw = json.loads(await request.body())
                        body = (CreateChatCompletionRequest if "messages" in raw
                                else CreateCompletionRequest)(**raw)
                    status, error = self.error_message_wrapper(error=exc, body=body)
                    return JSONResponse({"error": error}, status_code=status)
            return handler

    router = APIRouter(route_class=Route)

    async def publish(inner_send_chan, request, body, call, kwargs, proc, plan):
        async with server.pool.slot() as proxy:
            llm = lapp.prepare_request_resources(body, proxy, body.model, kwargs)
            async with inner_send_chan:
                it = None
                last = None
                try:
                    await run_in_threadpool(_reset_perf, llm)
                    t0 = time.perf_counter()
                    it = await run_in_threadpool(call, llm, **kwargs)
                    async for chunk in iterate_in_threadpool(it):
                        last = chunk
                        await inner_send_chan.send(dict(data=json.dumps(chunk)))
                        if await request.is_disconnected():
                            return
                    if plan.include_usage:
                        usage = await run_in_threadpool(_stream_usage, last, proc, llm,
                                                        time.perf_counter() - t0, plan)
                        await inner_send_chan.send(dict(data=json.dumps(usage)))
                    await inner_send_chan.send(dict(data="[DONE]"))
                except Exception as e:  # noqa: BLE001 - reported in the stream, not raised
                    _log(f"request failed while streaming: {_one_line(e)}")
                    with anyio.move_on_after(1, shield=True):
                        await inner_send_chan.send(dict(data=json.dumps(
                            {"error": {"message": f"cfgmask: {_one_line(e)}",
                                       "type": "internal_server_error"}})))
                finally:
                    if it is not None and hasattr(it, "close"):
                        with anyio.CancelScope(shield=True):
                            await run_in_threadpool(it.close)

    async def generate(kind, request: Request, body, call):
        raw = await request.json()
        try:
            plan = await run_in_threadpool(server.plan, kind, body, raw)
        except BadRequest as e:
            return _bad(e)
        kwargs, proc = server.prepare(kind, body, plan)
        if kwargs.get("stream", False):
            send_chan, recv_chan = anyio.create_memory_object_stream(10)
            return EventSourceResponse(
                recv_chan, sep="\n", ping_message_factory=lapp._ping_message_factory,
                data_sender_callable=partial(publish, send_chan, request, body, call, kwargs,
                                             proc, plan))
        async with server.pool.slot() as proxy:
            llm = lapp.prepare_request_resources(body, proxy, body.model, kwargs)
            return await run_in_threadpool(_run, llm, call, kwargs, proc, plan)

    auth = [Depends(lapp.authenticate)]

    @router.post("/v1/completions", dependencies=auth, summary="Completion (cfgmask)")
    @router.post("/v1/engines/copilot-codex/completions", dependencies=auth,
                 include_in_schema=False)
    async def completions(request: Request, body: CreateCompletionRequest):
        return await generate("completion", request, body, llama_cpp.Llama.__call__)

    @router.post("/v1/chat/completions", dependencies=auth, summary="Chat (cfgmask)")
    async def chat_completions(request: Request, body: CreateChatCompletionRequest):
        return await generate("chat", request, body, llama_cpp.Llama.create_chat_completion)

    app.include_router(router)


def _log(msg: str) -> None:
    print(f"cfgmask: {msg}", file=sys.stderr, flush=True)


def _named_store(text: str) -> Tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name, path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="GGUF model file")
    p.add_argument("--store", action="append", type=_named_store, default=[],
                   metavar="NAME=PATH", help="a compiled store, requested by NAME (or by its path)")
    p.add_argument("--allow-store-dir", action="append", default=[], metavar="DIR",
                   help="requests may give the path of any store file under DIR")
    p.add_argument("--grammar-dir", default=None,
                   help="folder of python.lark, sql.lark, json.lark (default: the shipped ones)")
    p.add_argument("--cache-dir", default=None,
                   help="where the shipped grammars compiled for the model are kept "
                        "(default: $CFGMASK_SERVE_CACHE, else ~/.cache/cfgmask/serve)")
    p.add_argument("--preload", action="store_true",
                   help="compile the shipped grammars at start, not on first use")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0: any free port (printed)")
    p.add_argument("--parallel", type=int, default=2,
                   help="requests generated at once (one model context each)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads per context (default: cores / parallel)")
    p.add_argument("--ctx", type=int, default=2048, help="context length per request")
    p.add_argument("--steer-tokens", type=int, default=32,
                   help="tokens a constrained request may take past max_tokens to reach an end")
    p.add_argument("--alias", default=None, help="the model's name in responses and /v1/models")
    p.add_argument("--api-key", default=None, help="require this bearer key")
    p.add_argument("--store-open", choices=["map", "copy"], default="map",
                   help="map store files (shared pages; replace them atomically) or copy them")


def serve(args) -> int:
    if not os.path.isfile(args.model):
        raise Error(f"{args.model}: no such model file")
    if args.parallel < 1:
        raise Error(f"--parallel must be at least 1, got {args.parallel}")
    for name, path in args.store:
        if not os.path.isfile(path):
            raise Error(f"--store {name}={path}: no such file")
    os.environ["CFGMASK_STORE_OPEN"] = "map" if args.store_open == "map" else "copy"
    try:
        import uvicorn
        from llama_cpp.server.model import LlamaProxy
        from llama_cpp.server.settings import ModelSettings, ServerSettings
    except ImportError as e:
        raise Error(f"serve needs llama-cpp-python's server (pip install "
                    f"'llama-cpp-python[server]'): {_one_line(e)}") from None
    threads = args.threads or max(1, (os.cpu_count() or 1) // args.parallel)
    args.model_settings = ModelSettings(
        model=args.model, model_alias=args.alias, n_ctx=args.ctx, n_threads=threads,
        n_threads_batch=threads, n_gpu_layers=0, logits_all=False, verbose=False)
    args.server_settings = ServerSettings(host=args.host, port=args.port, api_key=args.api_key)
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as e:
        raise Error(f"cannot listen on {args.host}:{args.port}: {e.strerror}") from None

    t0 = time.perf_counter()
    app, first = _llama_app(args)
    vocab = ModelVocab(first)
    cache_dir = args.cache_dir or os.environ.get("CFGMASK_SERVE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "cfgmask", "serve")
    grammars = Grammars(args.model, vocab, dict(args.store), args.allow_store_dir,
                        args.grammar_dir or default_grammar_dir(), cache_dir)
    grammars.load_registered()
    if args.preload:
        for name in grammars.names():
            try:
                grammars.by_name(name)
            except BadRequest as e:
                raise Error(str(e).removeprefix("cfgmask: ")) from None
    llms = [first] + [LlamaProxy.load_llama_from_model_settings(args.model_settings)
                      for _ in range(args.parallel - 1)]
    server = Server(args, llms, vocab, grammars)
    add_routes(app, server)
    sock.listen(128)
    port = sock.getsockname()[1]
    fim_text = server.fim.describe() if server.fim else "none (the prefix alone)"
    _log(f"serving {args.model} on http://{args.host}:{port}/v1 "
         f"({args.parallel} at once, {threads} threads each; grammars: "
         f"{', '.join(grammars.names()) or 'none'}; FIM template: {fim_text}; "
         f"ready in {time.perf_counter() - t0:.1f} s)")
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
