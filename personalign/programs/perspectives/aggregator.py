"""Multi-perspective answering (the ``perspectives`` stage): sample k user profiles, answer the
question once per profile, merge the answers under explicit rules.

Source: the behaviour-grounded profiles study of the project's issue (answer an open question
from several sampled profiles, then aggregate). Steps of :class:`MultiPerspective`:

1. **Profiles** (``sampler``):
   ``similar`` -- rank the bank by MiniLM cosine to the question, then ask the typed
   plausibility check ("could this user ask this?") down the ranking (at most ``pool``
   checks) and keep the first ``k`` plausible ones, filling up with the next most similar when
   fewer than ``k`` pass; ``random`` -- ``k`` profiles drawn uniformly (seeded per question);
   ``synthetic`` -- ``k`` profiles written by the LM (one call each, distinct ``rollout_id``);
   ``none`` -- no profile, ``k`` answers sampled at ``temperature`` (the high-temperature
   baseline).
2. **Answers**: one per profile, each with its own ``rollout_id`` (1..k) and ``temperature`` > 0,
   so they are distinct samples and never one cached answer (``none``: one call asking for
   ``n = k`` choices of the same prompt, which the embedded engine decodes as one batch,
   :func:`personalign.lm._batch.complete_many`); empty answers and refusals are
   dropped; meta, named and fragmentary sentences are removed (:func:`~.rules.clean_candidate`).
3. **Aggregate**: one call under the rules of
   :data:`~personalign.signatures.perspectives.AGGREGATION_RULES`; when the question asks for
   ``n`` items ("5 items", "top 3", "exactly five tips"; :func:`~personalign.programs.common.text.requested_count`)
   the constraint says "exactly n items, one per line" (with ``typed_items`` the answer is typed
   as exactly ``n`` strings instead).
4. **Post-check** in code (:func:`~.rules.enforce_rules`): no meta phrases, no persona names,
   no refusals, no language drift, no fragments, no ungrounded sentences, exactly ``n`` items,
   never empty. While
   the count still fails, up to ``max_reaggregations`` more aggregations are sampled
   (``rollout_id`` k+1, k+2, temperature 0.7) and their items pooled with the kept ones; as a
   last resort up to ``max_extra_candidates`` more candidates written without a profile are
   added as evidence to fill from (the "no facts absent from the candidates" rule then still
   holds). If the count still fails, the answer is returned with ``report["count_ok"]`` False
   and ``"count"`` in ``report["violations"]``.

LM calls per question (``similar``): up to ``pool`` plausibility checks + ``k`` answers + 1-3
aggregations (default pool 8, k 5: at most 16), plus at most 3 extra candidates when a
requested item count cannot be met. Budgets: profile text <= 600 characters,
candidates <= 600 characters each, answers ``answer_max_tokens`` (160) and the aggregate
``aggregate_max_tokens`` (400) output tokens; the aggregation prompt stays under ~1500 tokens.

``forward(question, profile_bank="")`` returns ``dspy.Prediction(answer: str, profiles:
list[str], candidates: list[str], n_items: int | None, report: dict)``.

Raises:
    ConfigurationError: a sampler needing a bank (``similar``, ``random``) got none.
    DataError: the bank file is missing or malformed.
    ValueError: no usable candidate answer, or an empty final answer (counted as a failure by
        ``run_program``).
"""

from __future__ import annotations

import hashlib
import random
from typing import Sequence

import dspy

from personalign.programs.perspectives.bank import Profile, ProfileBank, load_bank, profile_names
from personalign.programs.perspectives.rules import clean_candidate, enforce_rules, rule_violations
from personalign.programs.common.text import is_refusal, numbered, parse_items, requested_count, truncate_head
from personalign.signatures.perspectives import (
    AggregateSignature,
    ListAnswerSignature,
    PerspectiveAnswerSignature,
    PerspectiveItemsSignature,
    PlausibilitySignature,
    SyntheticProfileSignature,
    items_signature,
)
from personalign.signatures.respond import GenericRespondSignature

SAMPLERS = ("similar", "random", "synthetic", "none")
MAX_CANDIDATE_CHARS = 600


def _resolve_bank(profile_bank) -> ProfileBank | None:
    if profile_bank is None or profile_bank == "":
        return None
    if isinstance(profile_bank, ProfileBank):
        return profile_bank
    return load_bank(profile_bank)


class MultiPerspective(dspy.Module):
    """Multi-perspective answer (see the module docstring).

    Args:
        sampler: ``similar`` (default), ``random``, ``synthetic`` or ``none``.
        k: profiles / sampled answers (default 5).
        pool: most-similar profiles checked for plausibility (``similar``; default 8, >= k).
        plausibility: run the typed plausibility check (``similar`` only).
        temperature: sampling temperature of the per-profile answers (> 0).
        answer_max_tokens, aggregate_max_tokens: output budgets.
        seed: seed of the ``random`` sampler.
        profile_bank: default bank (path or :class:`ProfileBank`) when ``forward`` gets none.
        max_reaggregations: extra aggregation samples when the item count still fails (default 2).
        max_extra_candidates: then, at most this many extra no-profile candidate answers
            (temperature 0.8) added as evidence to fill the list from (default 3).
        typed_items: type list answers as exactly ``n`` strings (grammar-enforced on the embedded
            backend). Off by default: measured on SmolLM2-135M, the typed nested list is filled
            with schema echoes ("Items5", "packItem1", 4 of 4 samples) while free text gives real
            items ("1. Sunscreen; 2. Rain poncho; ..."); the count is enforced in code either way.
    """

    uses_lm = True

    def __init__(self, sampler: str = "similar", k: int = 5, pool: int = 8, plausibility: bool = True,
                 temperature: float = 0.8, answer_max_tokens: int = 160, aggregate_max_tokens: int = 400,
                 seed: int = 0, profile_bank=None, max_reaggregations: int = 2, max_extra_candidates: int = 3,
                 typed_items: bool = False) -> None:
        super().__init__()
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0 so the k answers are distinct samples, got {temperature}")
        self.sampler, self.k, self.pool = sampler, int(k), max(int(pool), int(k))
        self.plausibility, self.temperature = bool(plausibility), float(temperature)
        self.answer_max_tokens, self.aggregate_max_tokens = int(answer_max_tokens), int(aggregate_max_tokens)
        self.seed = int(seed)
        self.max_reaggregations = int(max_reaggregations)
        self.max_extra_candidates = int(max_extra_candidates)
        self.typed_items = bool(typed_items)
        self.default_bank = profile_bank
        self.plausible = dspy.Predict(PlausibilitySignature)
        self.answer = dspy.Predict(PerspectiveAnswerSignature)
        self.answer_plain = dspy.Predict(GenericRespondSignature)
        self.answer_items = dspy.Predict(items_signature(5, PerspectiveItemsSignature))
        self.list_plain = dspy.Predict(items_signature(5, ListAnswerSignature))
        self.synthesize = dspy.Predict(SyntheticProfileSignature)
        self.aggregate = dspy.Predict(AggregateSignature)
        self.aggregate_items = dspy.Predict(items_signature(5))

    @property
    def lm_calls_per_run(self) -> int:
        """Predictor calls of one forward pass, at most: profile sampling (``k`` synthetic profiles,
        or up to ``pool`` plausibility checks), ``k`` candidate answers, one aggregation, and the
        re-aggregations and extra candidates for the item count (read by the LM-call projection,
        :mod:`personalign.optimizers.budget`)."""
        sampling = {"synthetic": self.k, "similar": self.pool if self.plausibility else 0}.get(self.sampler, 0)
        return sampling + self.k + 1 + self.max_reaggregations + self.max_extra_candidates

    # ------------------------------------------------------------------ profiles
    def _sample_profiles(self, question: str, bank: ProfileBank | None) -> tuple[list[Profile], dict]:
        info: dict = {"sampler": self.sampler, "checked": 0, "plausible": 0, "profiles_filled": 0}
        if self.sampler == "none":
            return [], info
        if self.sampler == "synthetic":
            profiles: list[Profile] = []
            for i in range(self.k):
                out = self.synthesize(question=question, existing=[p.bio for p in profiles],
                                      config={"rollout_id": i + 1, "temperature": max(self.temperature, 0.9),
                                              "max_tokens": 120})
                bio = str(out.profile or "").strip()
                if bio:
                    profiles.append(Profile(f"synthetic:{i}", truncate_head(bio, 600), (), profile_names(bio)))
            return profiles, info
        if bank is None:
            from personalign.errors import ConfigurationError

            raise ConfigurationError(f"the '{self.sampler}' sampler needs a profile bank (profile_bank=PATH)")
        if self.sampler == "random":
            key = hashlib.sha1(f"{self.seed}\x00{question}".encode()).hexdigest()
            return random.Random(key).sample(bank.profiles, min(self.k, len(bank))), info
        ranked = [p for p, _ in bank.ranked(question)]
        chosen: list[Profile] = []
        if self.plausibility:
            for p in ranked[: self.pool]:
                info["checked"] += 1
                if bool(self.plausible(profile=p.text, question=question).plausible):
                    chosen.append(p)
                    if len(chosen) == self.k:
                        break
            info["plausible"] = len(chosen)
        for p in ranked:
            if len(chosen) >= self.k:
                break
            if p not in chosen:
                chosen.append(p)
                info["profiles_filled"] += 1
        return chosen, info

    # ------------------------------------------------------------------ answers
    @staticmethod
    def _items(answer) -> list[str]:
        items = getattr(answer, "items", None)
        if items is None and isinstance(answer, dict):
            items = answer.get("items")
        if items is None:
            items = [str(answer)]
        return [str(x) for x in items]

    def _one_answer(self, question: str, profile: Profile | None, n_items: int | None, rollout: int,
                    temperature: float) -> str:
        """One candidate: free text, or (``typed_items`` and the question asks for ``n_items``) a
        numbered list typed as exactly ``n_items`` strings (budget 60 tokens per item)."""
        if n_items and self.typed_items:
            config = {"rollout_id": rollout, "temperature": temperature,
                      "max_tokens": max(self.answer_max_tokens, 60 * n_items)}
            if profile is not None:
                out = self.answer_items(signature=items_signature(n_items, PerspectiveItemsSignature),
                                        profile=profile.text, question=question, config=config)
            else:
                out = self.list_plain(signature=items_signature(n_items, ListAnswerSignature), question=question,
                                      config=config)
            return numbered([x for x in self._items(out.answer) if x.strip()])
        config = {"rollout_id": rollout, "temperature": temperature, "max_tokens": self.answer_max_tokens}
        if profile is not None:
            return str(self.answer(profile=profile.text, question=question, config=config).answer or "")
        return str(self.answer_plain(prompt=question, config=config).response or "")

    def _answers(self, question: str, profiles: Sequence[Profile], names: Sequence[str],
                 n_items: int | None) -> list[str]:
        out = []
        if profiles or n_items and self.typed_items:
            texts = (self._one_answer(question, profiles[i] if profiles else None, n_items, i + 1, self.temperature)
                     for i in range(len(profiles) or self.k))
        else:  # k samples of one prompt: one call for n = k choices (batched on the embedded engine)
            config = {"rollout_id": 1, "temperature": self.temperature, "max_tokens": self.answer_max_tokens,
                      "n": self.k}
            texts = [str(r or "") for r in self.answer_plain(prompt=question, config=config).completions.response]
        for text in texts:
            text = text.strip()
            if not text or is_refusal(text) and len(text) < 200:
                continue
            cleaned = clean_candidate(truncate_head(text, MAX_CANDIDATE_CHARS), names, question=question)
            if cleaned:
                out.append(cleaned)
        return out

    def _aggregate(self, question: str, candidates: list[str], n_items: int | None, attempt: int):
        config = {"max_tokens": self.aggregate_max_tokens}
        if attempt:
            config.update(rollout_id=self.k + attempt, temperature=0.7)
        constraints = (f"exactly {n_items} items, one per line, numbered 1 to {n_items}" if n_items else "none")
        if n_items and self.typed_items:
            out = self.aggregate_items(signature=items_signature(n_items), question=question, constraints=constraints,
                                       candidates=candidates, config=config)
            return self._items(out.answer)
        return str(self.aggregate(question=question, constraints=constraints, candidates=candidates,
                                  config=config).answer or "")

    def forward(self, question: str, profile_bank=None) -> dspy.Prediction:
        question = truncate_head(str(question).strip(), 1500)
        bank = _resolve_bank(profile_bank if profile_bank not in (None, "") else self.default_bank)
        profiles, info = self._sample_profiles(question, bank)
        names = sorted({n for p in profiles for n in p.names})
        n_items = requested_count(question)
        candidates = self._answers(question, profiles, names, n_items)
        if not candidates:
            raise ValueError("no usable candidate answer (all empty, refusals or rule-breaking)")
        raw = self._aggregate(question, candidates, n_items, 0)
        answer, report = enforce_rules(raw, candidates, names=names, n_items=n_items, question=question)
        attempt, extra_tries = 0, 0
        while report.count_ok is False and (attempt < self.max_reaggregations or extra_tries < self.max_extra_candidates):
            kept = [line.split(". ", 1)[-1] for line in answer.splitlines() if line.strip()]
            if attempt < self.max_reaggregations:
                attempt += 1
                again = self._aggregate(question, candidates, n_items, attempt)
                more = kept + (parse_items(again) if isinstance(again, str) else list(again))
                note = f"re-aggregation {attempt} for the item count"
            else:  # last resort: more evidence -- one more candidate written without a profile
                extra_tries += 1
                extra = clean_candidate(self._one_answer(question, None, n_items, self.k + 10 + extra_tries, 0.8),
                                        names, question=question)
                if extra:
                    candidates.append(extra)
                more, note = kept, f"added no-profile candidate {extra_tries} for the item count"
            first = report
            answer, report = enforce_rules(more, candidates, names=names, n_items=n_items, question=question)
            for k in ("dropped_meta", "dropped_names", "dropped_refusals", "dropped_ungrounded", "dropped_fragments",
                      "dropped_echoes", "dropped_language", "filled", "relaxed"):
                setattr(report, k, getattr(report, k) + getattr(first, k))
            report.notes = first.notes + report.notes + [note]
        if not answer.strip():
            raise ValueError("the aggregated answer is empty after the rule checks")
        rep = report.as_dict()
        rep.update(info, violations=rule_violations(answer, names=names, n_items=n_items, question=question))
        return dspy.Prediction(answer=answer, profiles=[p.bio for p in profiles], candidates=candidates,
                               n_items=n_items, report=rep)


class RandomProfiles(MultiPerspective):
    """``random-profiles``: k profiles drawn uniformly from the bank (no similarity, no check)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("sampler", "random")
        super().__init__(**kwargs)


class HighTemperature(MultiPerspective):
    """``high-temperature``: k answers sampled without profiles at temperature 1.0, aggregated."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("sampler", "none")
        kwargs.setdefault("temperature", 1.0)
        super().__init__(**kwargs)


class SyntheticProfiles(MultiPerspective):
    """``synthetic-profiles``: k profiles written by the LM for the question, then as above."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("sampler", "synthetic")
        super().__init__(**kwargs)


class SingleAnswer(dspy.Module):
    """``no-profile``: one answer at temperature 0, no profiles, no aggregation; the same
    post-check as the aggregator (its own sentences are the only evidence, so a missing item
    cannot be filled: ``report["count_ok"]`` then says so). One LM call.

    ``forward(question, profile_bank=None)`` -> ``Prediction(answer, profiles=[], candidates,
    n_items, report)``.
    """

    uses_lm = True

    def __init__(self, max_tokens: int = 400) -> None:
        super().__init__()
        self.max_tokens = int(max_tokens)
        self.respond = dspy.Predict(GenericRespondSignature)

    def forward(self, question: str, profile_bank=None) -> dspy.Prediction:
        question = truncate_head(str(question).strip(), 1500)
        text = str(self.respond(prompt=question, config={"max_tokens": self.max_tokens}).response or "").strip()
        if not text:
            raise ValueError("the model returned an empty answer")
        n_items = requested_count(question)
        answer, report = enforce_rules(text, [text], n_items=n_items, question=question)
        if not answer.strip():
            answer = text
        rep = report.as_dict()
        rep["violations"] = rule_violations(answer, n_items=n_items, question=question)
        return dspy.Prediction(answer=answer, profiles=[], candidates=[text], n_items=n_items, report=rep)


__all__ = ["SAMPLERS", "MultiPerspective", "RandomProfiles", "HighTemperature", "SyntheticProfiles", "SingleAnswer"]
