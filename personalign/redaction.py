"""Secrets out of everything personalign records or prints: one function, :func:`redact`.

Every command line, keyword-argument object, URL and message personalign writes to disk (run
records: ``runs/compare/*.json``, ``--results`` files, ``benchmarks/results/``; MLflow params,
tags and artifacts) or prints (one-line errors, endpoint and store summaries) goes through
:func:`redact`, which replaces secrets with ``***`` and leaves everything else as it was:

* **keys naming a secret** (:func:`names_secret`): ``api_key``, ``x-api-key``, ``access_key``,
  ``OPENAI_API_KEY``, any ``<word>_key`` but a data/record field's (``group_key``, ``sort_keys``,
  a figure's bare ``key``...); ``token``, ``access_token`` (not ``max_tokens``, ``token_budget``);
  ``secret``, ``password``, ``passwd``, ``pwd``, ``authorization``, ``auth``, ``credential(s)``,
  ``cookie``: the whole value, a dict or list included;
* **headers**: every value under ``headers``, ``extra_headers``, ``default_headers`` (any key
  whose words include ``headers``): the header names stay;
* **URLs**, wherever they stand in a string: the user-info's password (``scheme://user:***@host``)
  and a user-info without one (a token: ``scheme://***@host``); secret query parameters
  (``?api_key=***``) by the key rule below, and ``?key=``, ``?sig=``, ``?signature=``, ``?code=``;
* **command lines** (an argv list, or one shell string): the value of an option naming a secret
  (``--api-key K``, ``--token=K``), ``--lm-kwargs`` JSON redacted as a kwargs object (a value that
  is not JSON: all of it), JSON objects anywhere in an argument;
* **free text**: ``key: value``, ``key=value`` and ``"key": "value"`` pairs whose key names a
  secret, ``Bearer`` credentials, and every *known* secret value (8 characters or more)
  wherever it appears: values of environment variables whose names contain KEY, TOKEN, SECRET or
  PASSWORD, the secret values of ``PERSONALIGN_LM_KWARGS`` and the password of
  ``PERSONALIGN_API_BASE``.

Limits: a secret under a key that names none (``{"x": "sk-..."}``) or in a URL's path is caught
only when it is a known value; the argv of a running process (``ps``) is the operating system's.
Light: standard library only (the CLI's flag checks import it).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
from typing import Any

MASK = "***"
MIN_KNOWN = 8  # shorter known values ("none", "x") are not replaced inside free text

_SECRET_WORDS = frozenset({"secret", "secrets", "password", "passwd", "pwd", "passphrase", "authorization", "auth",
                           "credential", "credentials", "cookie", "cookies", "apikey", "bearer"})
# "<word>_key(s)" of data and record fields, not keys to anything
_FIELD_KEY = frozenset({"group", "groups", "metric", "metrics", "sort", "unit", "primary", "foreign", "cache",
                        "partition", "join", "figure", "record", "dict", "lookup", "hash", "index", "label", "field",
                        "split", "stage", "strategy", "data", "sample", "row", "column", "item", "entry", "order",
                        "decision", "cluster", "strata", "state", "path", "limit", "user", "prompt", "topic", "input",
                        "output", "gold", "name", "sha", "sha256", "dedup", "map", "score", "id", "ids", "result"})
_TOKEN_COUNT = frozenset({"per", "next", "first", "last", "max", "min", "n", "num", "eos", "bos", "budget", "count",
                          "counts", "limit", "logprobs", "probs", "prob", "id", "ids", "len", "length", "type",
                          "usage", "get", "text", "rate"})
_ENV_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.I)
_KWARGS_FLAGS = frozenset({"--lm-kwargs"})
_NO_VALUE = frozenset({MASK, "", "null", "None", "true", "false", "True", "False"})

_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^\s/?#'\"<>]+)@")
# user:password@host without a well-formed scheme ("http//u:pw@h", "u:pw@h"): the password masked
# (:func:`_bare_userinfo`: a scan back from each "@", linear; the regex it replaced was quadratic)
_NOT_USERINFO = frozenset("/@'\"<>")
#: query parameters that hold a secret though their name alone does not say so (Google's ``?key=``,
#: signed URLs' ``?sig=``): masked in URLs (``?key=***``)
QUERY_SECRETS = frozenset({"key", "sig", "signature", "code", "x-amz-signature", "x-amz-credential",
                           "x-goog-signature", "x-goog-credential"})
_QUERY_PAIR = re.compile(r"(?<=[?&;])(?P<k>[A-Za-z_%][\w.%-]*)=(?P<v>[^&#\s'\"<>]+)")
_OBJECT_START = re.compile(r'\{\s*(?:\}|"(?:[^"\\]|\\.)*"\s*:)')  # '{' then '}' or a key and ':'

_CREDENTIAL = re.compile(r"\b(?P<scheme>Bearer)(?P<sp>\s+)(?P<cred>[A-Za-z0-9._~+/=:-]{4,})")
_FLAG = re.compile(r"(?<!\S)(?P<flag>--?[A-Za-z][\w-]*)(?:=|\s+)")
_FLAG_VALUE = re.compile(r"'[^']*'|\"(?:\\.|[^\"\\])*\"|\S+")
# a key, bare or quoted ('k', "k", or \"k\" inside a JSON-encoded string), then : or =
_PAIR_KEY = re.compile(r"(?<![\w.-])(?P<q>\\?[\"']|)(?P<key>[A-Za-z_][\w.-]*)(?P=q)(?P<sep>\s*[:=]\s*)")
_PAIR_VALUE = re.compile(r"\\\"(?:(?!\\\").)*\\\"|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|"
                         r"(?:(?:Bearer|Basic|Digest|Token)\s+)?[^\s,;&'\"{}\[\]()<>]+")


def _words(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(key))
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


@functools.lru_cache(maxsize=4096)
def names_secret(key: str) -> bool:
    """Whether a dict key, option name (``--api-key``), header or variable name names a secret
    (the key rule of the module docstring): ``api_key``, ``Authorization``, ``HF_TOKEN`` yes;
    ``max_tokens``, ``group_key``, ``key``, ``api_base`` no."""
    words = _words(key)
    for i, w in enumerate(words):
        before = words[i - 1] if i else ""
        after = words[i + 1] if i + 1 < len(words) else ""
        if w in _SECRET_WORDS:
            return True
        if w == "token" and before not in _TOKEN_COUNT and after not in _TOKEN_COUNT:
            return True
        if w in ("key", "keys") and before and before not in _FIELD_KEY:
            return True
    return False


def _names_headers(key: str) -> bool:
    words = _words(key)
    return "headers" in words or words == ["header"]


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == {} or value == []


def redact(value: Any, key: str = "") -> Any:
    """``value`` with its secrets replaced by ``***`` (what is a secret: the module docstring).

    Args:
        value: a command line (an argv list or one shell string), a kwargs object (nested dicts
            and lists), a URL, or any text or JSON-like value; other types are returned as they are.
        key: the dict key or name ``value`` stands under (``"api_key"`` masks all of it).

    Returns:
        The same shape: a dict stays a dict (the same keys), a list or tuple becomes a list, a
        string stays a string (unchanged when it holds no secret). Idempotent.
    """
    return _redact(value, key, _known_secrets())


def redactor():
    """:func:`redact` with the known secret values read from the environment once: for redacting
    many values in a row (a results page's every cell), where reading the environment per value
    would dominate."""
    known = _known_secrets()
    return lambda value, key="": _redact(value, key, known)


def _redact(value: Any, key: str, known: list[str]) -> Any:
    if key and names_secret(key):
        return value if _empty(value) else MASK
    if key and _names_headers(key):
        if isinstance(value, dict):
            return {k: v if _empty(v) else MASK for k, v in value.items()}
        return value if _empty(value) else MASK
    if isinstance(value, dict):
        return {k: _redact(v, str(k), known) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return _argv(value, known)
    if isinstance(value, str):
        return _text(value, known)
    return value


def _argv(items, known: list[str]) -> list:
    """A list, read as an argv too: the item after an option naming a secret is masked, the item
    after ``--lm-kwargs`` is redacted as JSON (all of it when it is not JSON)."""
    out, pending = [], None
    for item in items:
        if pending is not None and isinstance(item, str):
            out.append(MASK if pending == "secret" or not _is_json(item) else _text(item, known))
            pending = None
            continue
        pending = None
        if isinstance(item, str) and item.startswith("-"):
            flag, eq, value = item.partition("=")
            kind = "secret" if names_secret(flag) else "kwargs" if flag in _KWARGS_FLAGS else None
            if not eq:
                pending = kind
            elif kind is not None and value:  # --api-key=K, --lm-kwargs={...}: the value as a separate item
                out.append(f"{flag}={MASK if kind == 'secret' or not _is_json(value) else _text(value, known)}")
                continue
        out.append(_redact(item, "", known))
    return out


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _text(text: str, known: list[str]) -> str:
    if not text:
        return text
    text = _flags(text)
    text = _json_objects(text, known)
    text = _pairs(text)
    text = _CREDENTIAL.sub(lambda m: m["scheme"] + m["sp"] + MASK, text)
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _bare_userinfo(text)
    if "=" in text and ("?" in text or "&" in text or ";" in text):
        text = _QUERY_PAIR.sub(lambda m: f"{m['k']}={MASK}" if m["v"] != MASK and query_secret(m["k"]) else m[0],
                               text)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _flags(text: str) -> str:
    """The value after an option naming a secret, and a ``--lm-kwargs`` value that is not JSON, masked."""
    out, i = [], 0
    for m in _FLAG.finditer(text):
        secret = names_secret(m["flag"])
        if m.start() < i or not (secret or m["flag"] in _KWARGS_FLAGS):
            continue
        v = _FLAG_VALUE.match(text, m.end())
        if v is None or v.group(0).strip("'\"") == MASK:
            continue
        val = v.group(0)
        if not secret:
            try:
                inner = shlex.split(val)
            except ValueError:
                inner = []
            if len(inner) == 1 and _is_json(inner[0]):
                continue  # redacted as JSON (_json_objects)
        quote = val[0] if val[0] in "'\"" else ""
        out.append(text[i:v.start()] + f"{quote}{MASK}{quote}")
        i = v.end()
    return "".join(out) + text[i:] if out else text


def _json_objects(text: str, known: list[str]) -> str:
    """Every JSON object or array embedded in ``text`` redacted as a kwargs object (re-written as
    JSON only when something in it was redacted)."""
    if "{" not in text:
        return text
    decoder, out, i = json.JSONDecoder(), [], 0
    while True:
        found = _OBJECT_START.search(text, i)  # only where an object can start
        if found is None:
            out.append(text[i:])
            return "".join(out)
        start = found.start()
        try:
            obj, end = _decode_at(decoder, text, start)
        except ValueError:
            out.append(text[i:start + 1])
            i = start + 1
            continue
        except RecursionError:  # nested too deep to read: what it holds cannot be told, so none of it is kept
            out.append(text[i:start] + MASK)
            return "".join(out)
        clean = _redact(obj, "", known)
        out.append(text[i:start])
        out.append(text[start:end] if clean == obj else json.dumps(clean, ensure_ascii=False))
        i = end


_WINDOW = 16384


def _decode_at(decoder: json.JSONDecoder, text: str, start: int) -> tuple[Any, int]:
    """``decoder.raw_decode(text, start)``, read first in a window of :data:`_WINDOW` characters:
    a failed decode's error message counts the lines before the failure, from the start of the
    string it was given, so decoding the whole text at each of many candidate ``{`` was quadratic.
    The whole rest of the text is read only when the window ended inside the object."""
    window = text[start:start + _WINDOW]
    try:
        obj, end = decoder.raw_decode(window)
        return obj, start + end
    except json.JSONDecodeError as exc:
        cut = len(window) < len(text) - start
        ran_out = exc.pos >= len(window) - 1 or (exc.msg.startswith("Unterminated string")
                                                 and '"' not in window[exc.pos + 1:])
        if not (cut and ran_out):
            raise
    return decoder.raw_decode(text, start)


def _pairs(text: str) -> str:
    out, i = [], 0
    for m in _PAIR_KEY.finditer(text):
        if m.start() < i or not names_secret(m["key"]):
            continue
        v = _PAIR_VALUE.match(text, m.end())
        if v is None or v.group(0).strip("\\'\"") in _NO_VALUE:
            continue
        quote = re.match(r"\\?['\"]|", v.group(0)).group(0) or m["q"]  # a JSON number stays JSON: "***"
        out.append(text[i:v.start()] + f"{quote}{MASK}{quote}")
        i = v.end()
    return "".join(out) + text[i:] if out else text


def query_secret(name: str) -> bool:
    """A URL query parameter's name (percent-decoded) names a secret: the key rule, or
    :data:`QUERY_SECRETS`."""
    from urllib.parse import unquote

    plain = unquote(name)
    return plain.lower() in QUERY_SECRETS or names_secret(plain)


def _bare_userinfo(text: str) -> str:
    """``user:password@host`` without a scheme: the password masked. For each ``@`` followed by a
    word character or ``[``, the run before it (no whitespace, ``/``, ``@``, quotes, ``<>``) is
    ``user:password`` when it holds a ``:`` after a non-empty user (leading colons skipped). Runs
    end at ``@``, so each character is read at most twice: linear in ``len(text)``."""
    if "@" not in text or ":" not in text:
        return text
    out, pos, n = [], 0, len(text)
    j = text.find("@")
    while j >= 0:
        if j + 1 < n and (text[j + 1].isalnum() or text[j + 1] in "_["):
            start = j
            while start > pos and text[start - 1] not in _NOT_USERINFO and not text[start - 1].isspace():
                start -= 1
            run = text[start:j]
            lead = len(run) - len(run.lstrip(":"))
            colon = run.find(":", lead)
            if colon > lead and colon + 1 < len(run) and run[colon + 1:] != MASK:
                out.append(text[pos:start + colon + 1] + MASK)
                pos = j
        j = text.find("@", j + 1)
    return "".join(out) + text[pos:] if out else text


def _userinfo(m: re.Match) -> str:
    info = m["info"]
    user, colon, _ = info.partition(":")
    return f"{m['scheme']}{user}:{MASK}@" if colon else f"{m['scheme']}{MASK}@"


def _known_secrets() -> list[str]:
    """Known secret values, longest first: secret-named environment variables' values and the
    secrets of ``PERSONALIGN_LM_KWARGS`` and ``PERSONALIGN_API_BASE`` (8+ characters)."""
    found = {v for k, v in os.environ.items() if _ENV_SECRET.search(k) and len(v) >= MIN_KNOWN}
    found |= _endpoint_secrets(os.environ.get("PERSONALIGN_LM_KWARGS", ""), os.environ.get("PERSONALIGN_API_BASE", ""))
    return sorted(found, key=len, reverse=True)


@functools.lru_cache(maxsize=8)
def _endpoint_secrets(kwargs_json: str, api_base: str) -> frozenset[str]:
    found: set[str] = set()

    def walk(obj: Any, secret: bool) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, secret or names_secret(str(k)) or _names_headers(str(k)))
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v, secret)
        elif secret and isinstance(obj, str):
            found.add(obj)
            found.update(part for part in obj.split() if part not in ("Bearer", "Basic", "Digest", "Token"))

    try:
        walk(json.loads(kwargs_json), False) if kwargs_json.strip() else None
    except ValueError:
        pass
    m = _URL_USERINFO.search(api_base)
    if m:
        found.add(m["info"].partition(":")[2] or m["info"])  # the password, or a lone user-info (a token)
    return frozenset(s for s in found if len(s) >= MIN_KNOWN)


__all__ = ["MASK", "QUERY_SECRETS", "names_secret", "query_secret", "redact", "redactor"]
