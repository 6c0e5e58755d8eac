"""A mock LM as a litellm custom provider ``mock``, registered in-process (no network, no model).

``dspy.LM("mock/relevance-200ms")`` (or :func:`personalign.lm.make_lm` with that string), after
:func:`register`, sleeps the latency named in the model string (``-200ms``; default 0) per call --
``time.sleep`` releases the GIL, like waiting on a hosted API -- and answers every output field of
the DSPy signature (:func:`personalign.testing._prompt.output_fields`; a prompt that is not DSPy's
gets one ``relevant`` bool) in the format of the adapter that asked: ChatAdapter's
``[[ ## field ## ]]`` sections, or a JSON object when the request carries a ``response_format``.
Booleans are a deterministic function of the whole conversation (so demos and instructions change
the answers, as they would with a real model), true about 30% of the time. Every call returns
token usage, so DSPy counts it as an LM call; :data:`CALLS` ``["n"]`` counts them in this process.

    from personalign.testing import mock_provider
    mock_provider.register()
    lm = personalign.lm.make_lm("mock/relevance-200ms")

``python -m personalign.testing.mock_provider ARGS...`` runs the ``personalign`` CLI with the
provider registered.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time

from personalign.testing._prompt import chat_reply, output_fields, system_message

PROVIDER = "mock"
_lock = threading.Lock()
_registered = False
CALLS = {"n": 0}
_DEFAULT_FIELDS = [("relevant", "bool")]


def _latency(model: str) -> float:
    m = re.search(r"(\d+)ms", model)
    return int(m.group(1)) / 1000.0 if m else 0.0


def _value(name: str, typ: str, digest: bytes, i: int):
    t = typ.lower()
    if t.startswith("bool"):
        return digest[i % len(digest)] % 10 < 3
    if t.startswith("int"):
        return int(digest[i % len(digest)] % 5)
    if t.startswith("float"):
        return round(digest[i % len(digest)] / 255.0, 3)
    if t.startswith("list"):
        return []
    return f"mock {name}"


def _render(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def answer(messages: list[dict], json_mode: bool) -> str:
    """The mock's reply to a DSPy prompt: a JSON object (``json_mode`` or a non-ChatAdapter
    prompt) or ChatAdapter sections."""
    system = system_message(messages)
    text = json.dumps(messages, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).digest()
    fields = output_fields(system) or _DEFAULT_FIELDS
    values = {name: _value(name, typ, digest, i) for i, (name, typ) in enumerate(fields)}
    if json_mode or "[[ ## completed ## ]]" not in system:
        return json.dumps(values)
    return chat_reply(values, render=_render).rstrip("\n")  # no final newline (token counts as before)


def handler():
    """A new litellm ``CustomLLM`` answering with :func:`answer` (what :func:`register` installs)."""
    from litellm import CustomLLM
    from litellm.types.utils import Choices, Message, ModelResponse, Usage

    class MockLLM(CustomLLM):
        def completion(self, model: str, messages: list, api_base: str, custom_prompt_dict: dict,
                       model_response: ModelResponse, print_verbose, encoding, api_key, logging_obj,
                       optional_params: dict, acompletion=None, litellm_params=None, logger_fn=None,
                       headers=None, timeout=None, client=None) -> ModelResponse:
            time.sleep(_latency(model))
            with _lock:
                CALLS["n"] += 1
            params = dict(optional_params or {})
            content = answer(messages, json_mode=params.get("response_format") is not None)
            n_prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4
            return ModelResponse(model=model, created=int(time.time()),
                                 choices=[Choices(index=0, finish_reason="stop",
                                                  message=Message(role="assistant", content=content))],
                                 usage=Usage(prompt_tokens=n_prompt, completion_tokens=len(content) // 4,
                                             total_tokens=n_prompt + len(content) // 4))

        async def acompletion(self, *args, **kwargs) -> ModelResponse:
            import asyncio

            return await asyncio.to_thread(self.completion, *args, **kwargs)

    return MockLLM()


def register() -> None:
    """Register the ``mock`` provider with litellm (idempotent; keeps other custom providers)."""
    global _registered
    with _lock:
        if _registered:
            return
        import personalign  # noqa: F401  (offline litellm defaults before litellm is imported)
        import litellm
        from litellm.utils import custom_llm_setup

        entries = [e for e in (litellm.custom_provider_map or []) if e.get("provider") != PROVIDER]
        litellm.custom_provider_map = entries + [{"provider": PROVIDER, "custom_handler": handler()}]
        custom_llm_setup()
        _registered = True


def main(argv: list[str] | None = None) -> None:
    """Run the ``personalign`` CLI with the mock provider registered."""
    import sys

    register()
    from personalign.cli import main as cli_main

    cli_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
