"""The ``local`` litellm provider: ``litellm.completion(model="local/NAME", ...)`` runs the
embedded model in-process, so ``dspy.LM("local/NAME")`` works like any hosted model and every
other litellm model string keeps working unchanged.

How typed outputs reach llama.cpp (DSPy 3.4): DSPy's JSONAdapter sends ``response_format`` only
when ``litellm.get_supported_openai_params`` lists it and ``litellm.supports_response_schema`` is
true for the model. A provider in ``litellm.custom_provider_map`` gets neither by default, so
:func:`register` (1) runs litellm's ``custom_llm_setup`` so the provider is known and answers with
the OpenAI-compatible parameter list, and (2) registers each embedded model with
``supports_response_schema=True`` via ``litellm.register_model``. The handler turns the schema into
a GBNF grammar (see :mod:`personalign.lm._engine`).
"""

from __future__ import annotations

import threading
import time

from personalign.lm._models import MODELS, PROVIDER

_registered = False
_lock = threading.Lock()


def _make_handler():
    import litellm
    from litellm import CustomLLM
    from litellm.types.utils import Choices, Message, ModelResponse, Usage

    from personalign.lm._engine import schema_from_response_format

    class LocalLlamaHandler(CustomLLM):
        """litellm custom handler for ``local/NAME`` models (sync and async)."""

        def completion(self, model: str, messages: list, api_base: str, custom_prompt_dict: dict,
                       model_response: ModelResponse, print_verbose, encoding, api_key, logging_obj,
                       optional_params: dict, acompletion=None, litellm_params=None, logger_fn=None,
                       headers=None, timeout=None, client=None) -> ModelResponse:
            from personalign.lm._engine import get_engine  # looked up per call: a test may serve a stand-in
            from personalign.lm.ledger import Probed, probing

            if probing():  # a projection's probe never reaches the model (personalign.lm.ledger)
                raise Probed
            name = model.split("/", 1)[1] if model.startswith(PROVIDER + "/") else model
            engine = get_engine(f"{PROVIDER}/{name}")
            params = dict(optional_params or {})
            schema = schema_from_response_format(params.get("response_format"))
            prompt, stop = engine.render(messages)
            user_stop = params.get("stop")
            if isinstance(user_stop, str):
                user_stop = [user_stop]
            n = int(params.get("n") or 1)
            top = params.get("top_logprobs")
            logprobs = (min(20, max(0, int(top or 0))) if params.get("logprobs") else None)
            seed = params.get("seed")
            choices = []
            prompt_tokens = completion_tokens = 0
            kwargs = {"max_tokens": params.get("max_tokens") or params.get("max_completion_tokens"),
                      "temperature": params.get("temperature"), "stop": sorted(set(stop + (user_stop or []))),
                      "schema": schema}
            sampled = (params.get("temperature") or 0) > 0  # greedy choices are the engine's own, exactly
            if n > 1 and sampled and logprobs is None and engine.settings.batch_decode:  # n sequences, one batch
                from personalign.lm._batch import complete_many

                outs = complete_many(engine, [prompt] * n, seeds=None if seed is None else
                                     [int(seed) + i for i in range(n)], **kwargs)
            else:
                outs = [engine.complete(prompt, seed=None if seed is None else int(seed) + i, logprobs=logprobs,
                                        **kwargs) for i in range(n)]
            for i, out in enumerate(outs):
                prompt_tokens = out.prompt_tokens
                completion_tokens += out.completion_tokens
                extra = {"logprobs": {"content": out.logprobs}} if out.logprobs is not None else {}
                choices.append(Choices(index=i, finish_reason=out.finish_reason,
                                       message=Message(role="assistant", content=out.text), **extra))
            return ModelResponse(
                model=f"{PROVIDER}/{name}",
                created=int(time.time()),
                choices=choices,
                usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                            total_tokens=prompt_tokens + completion_tokens),
            )

        async def acompletion(self, *args, **kwargs) -> ModelResponse:
            import asyncio

            return await asyncio.to_thread(self.completion, *args, **kwargs)

    return litellm, LocalLlamaHandler()


def register() -> None:
    """Register the ``local`` provider and its models with litellm (idempotent, thread-safe)."""
    global _registered
    if _registered:
        return
    with _lock:
        if _registered:
            return
        litellm, handler = _make_handler()
        litellm.suppress_debug_info = True  # no "Provider List" / debug banners on stdout
        from litellm.utils import custom_llm_setup

        entries = [e for e in (litellm.custom_provider_map or []) if e.get("provider") != PROVIDER]
        litellm.custom_provider_map = entries + [{"provider": PROVIDER, "custom_handler": handler}]
        custom_llm_setup()
        info = {}
        for spec in MODELS.values():
            info[spec.model_string] = {
                "litellm_provider": PROVIDER,
                "mode": "chat",
                "supports_response_schema": True,
                "supports_function_calling": False,
                "max_input_tokens": spec.trained_ctx,
                "max_output_tokens": 4096,
                "max_tokens": 4096,
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0,
                "cache_creation_input_token_cost": 0.0,
                "cache_read_input_token_cost": 0.0,
            }
        litellm.register_model(info)
        _registered = True


def grammar_constrained(model: str) -> bool:
    """True when litellm reports schema support and the response_format parameter for ``model``,
    i.e. DSPy's JSONAdapter will send the signature's schema to the grammar-constrained handler."""
    import litellm

    register()
    params = litellm.get_supported_openai_params(model=model, custom_llm_provider=PROVIDER) or []
    return "response_format" in params and bool(
        litellm.supports_response_schema(model=model, custom_llm_provider=PROVIDER)
    )
