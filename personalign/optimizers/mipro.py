"""``mipro``: DSPy's MIPROv2 -- instruction proposals x demo sets, searched with Optuna's TPE."""

from __future__ import annotations

import math
import random

from personalign.optimizers._teleprompter import TeleprompterOptimizer

AUTO_N = {"light": 6, "medium": 12, "heavy": 18}  # DSPy 3.4.1 AUTO_RUN_SETTINGS[...]["n"]
AUTO_VAL_SIZE = {"light": 100, "medium": 300, "heavy": 1000}
MIN_MINIBATCH_SIZE = 50  # DSPy: auto mode minibatches only valsets larger than this


def _guarded_mipro_class():
    from dspy.teleprompt import MIPROv2

    class GuardedMIPROv2(MIPROv2):
        """MIPROv2 whose few-shot candidate step honours demo limits of 0 (DSPy 3.4.1 traps):

        * ``max_bootstrapped_demos=0, max_labeled_demos>0``: DSPy's ``create_n_fewshot_demo_sets``
          calls ``rng.randint(1, 0)`` for its shuffled sets and crashes (ValueError). Here the
          candidate sets are labeled-only: set 0 empty (zero-shot), the others ``max_labeled_demos``
          train examples drawn with the seeded rng. No LM calls.
        * both 0: DSPy swaps in 3 bootstrapped demos per set (``BOOTSTRAPPED_FEWSHOT_EXAMPLES_IN_CONTEXT``)
          to inform instruction proposals, spending LM calls, and drops them afterwards. Here no demo
          sets are built at all (instruction-only search; the proposer runs without task demos).
        """

        def _bootstrap_fewshot_examples(self, program, trainset, seed, teacher, *, num_fewshot_candidates,
                                        max_bootstrapped_demos, max_labeled_demos, max_errors, metric_threshold):
            if max_bootstrapped_demos == 0 and max_labeled_demos == 0:
                return None
            if max_bootstrapped_demos == 0:
                rng = random.Random(seed)
                k = min(max_labeled_demos, len(trainset))
                sets = {}
                for i, _ in enumerate(program.predictors()):
                    sets[i] = [[]] + [rng.sample(list(trainset), k) for _ in range(max(0, num_fewshot_candidates - 1))]
                return sets
            return super()._bootstrap_fewshot_examples(
                program, trainset, seed, teacher, num_fewshot_candidates=num_fewshot_candidates,
                max_bootstrapped_demos=max_bootstrapped_demos, max_labeled_demos=max_labeled_demos,
                max_errors=max_errors, metric_threshold=metric_threshold)

    return GuardedMIPROv2


class MIPROv2(TeleprompterOptimizer):
    """Wrap ``dspy.MIPROv2`` with bounded, CPU-sized search.

    Budget: with ``auto`` ("light"/"medium"/"heavy") the wrapper derives DSPy's auto settings
    itself -- ``n`` candidates (6/12/18), ``n`` demo sets, ``n`` instructions (``n/2`` when demos are
    optimized), trials ``max(2 x vars x log2(n), 1.5 n)`` -- and caps the trials at ``max_trials``;
    with ``auto=None`` give ``num_candidates`` and ``num_trials``. DSPy then runs with
    ``auto=None`` and these explicit numbers. ``minibatch`` is used only when the valset is larger
    than ``minibatch_size`` (DSPy raises otherwise).

    Projected LM calls (teleprompter), with ``P`` predictors, ``c = calls_per_run``, ``p`` = calls of a
    prompt-model call, ``N``/``V`` train/val sizes, ``D`` demo sets, ``I`` instructions, ``T`` trials:

    * bootstrap (task model): ``B x N x c`` where ``B`` = number of demo sets DSPy bootstraps
      (sets -1 and 0..D-4, plus set -2 when ``max_labeled_demos = 0``); 0 when
      ``max_bootstrapped_demos = 0`` (labeled-only sets, see the guard);
    * proposals (prompt model): data summary ``2 + min(ceil(N / view_data_batch_size) - 1, 9)``
      (if data-aware) plus ``P x I x (1 + 2 if program-aware)`` calls, each ``x p``;
    * search (task model): ``V x c`` for the default program, then ``T x V x c`` without minibatch,
      or ``T x minibatch_size x c + (T // full_eval_steps + 2) x V x c`` with minibatch.

    Guards (see ``GuardedMIPROv2``): demo limits of 0 are honoured (no crash, no swapped-in
    demos); the seed is passed to both the constructor and ``compile`` so DSPy's
    ``seed = seed or self.seed`` cannot replace 0 by its default 9; the teleprompter is built
    inside ``dspy.context`` so its task/prompt model is the wrapper's LM.
    """

    name = "mipro"
    max_alternatives = 2  # runner-up candidate programs offered to the final choice on dev
    seed_note = "seed passed to MIPROv2(seed=) and compile(seed=) (TPE sampler, demo sets, proposals)"

    def __init__(self, *, auto: str | None = "light", max_trials: int = 6, num_candidates: int | None = None,
                 num_trials: int | None = None, max_bootstrapped_demos: int = 2, max_labeled_demos: int = 2,
                 prompt_lm=None, minibatch_size: int = 35, minibatch_full_eval_steps: int = 5,
                 view_data_batch_size: int = 10, program_aware_proposer: bool = True,
                 data_aware_proposer: bool = True, tip_aware_proposer: bool = True,
                 fewshot_aware_proposer: bool = True, init_temperature: float = 1.0,
                 metric_threshold: float | None = None, max_errors: int | None = None, **common) -> None:
        super().__init__(**common)
        if auto is not None and auto not in AUTO_N:
            raise ValueError(f"auto must be one of {sorted(AUTO_N)} or None")
        if auto is None and (num_candidates is None or num_trials is None):
            raise ValueError("with auto=None give num_candidates and num_trials")
        if min(max_bootstrapped_demos, max_labeled_demos) < 0:
            raise ValueError("demo limits must be >= 0")
        self.auto = auto
        self.max_trials = int(max_trials)
        self.num_candidates = num_candidates
        self.num_trials = num_trials
        self.max_bootstrapped_demos = int(max_bootstrapped_demos)
        self.max_labeled_demos = int(max_labeled_demos)
        self.prompt_lm = prompt_lm
        self.minibatch_size = int(minibatch_size)
        self.minibatch_full_eval_steps = int(minibatch_full_eval_steps)
        self.view_data_batch_size = int(view_data_batch_size)
        self.program_aware_proposer = program_aware_proposer
        self.data_aware_proposer = data_aware_proposer
        self.tip_aware_proposer = tip_aware_proposer
        self.fewshot_aware_proposer = fewshot_aware_proposer
        self.init_temperature = init_temperature
        self.metric_threshold = metric_threshold
        self.max_errors = max_errors

    def _zeroshot(self) -> bool:
        return self.max_bootstrapped_demos == 0 and self.max_labeled_demos == 0

    def plan(self, program, trainset, valset) -> dict:
        """Effective ``{"demo_sets", "instructions", "trials", "val_size", "minibatch"}``."""
        n_pred = max(1, len(program.predictors()))
        # DSPy without a valset: the last 80% of trainset (at most 1000) becomes the valset
        v = len(valset) if valset else min(1000, max(1, int(len(trainset) * 0.8)))
        if self.auto is not None:
            n = AUTO_N[self.auto]
            n_vars = n_pred * (1 if self._zeroshot else 2)
            trials = int(max(2 * n_vars * math.log2(n), 1.5 * n))
            trials = min(trials, self.max_trials)
            instructions = n if self._zeroshot else int(n * 0.5)
            demo_sets = n
            if valset:
                v = min(v, AUTO_VAL_SIZE[self.auto])
            minibatch = v > max(MIN_MINIBATCH_SIZE, self.minibatch_size)
        else:
            instructions = demo_sets = int(self.num_candidates)
            trials = int(self.num_trials)
            minibatch = v > self.minibatch_size
        return {"demo_sets": demo_sets, "instructions": instructions, "trials": trials, "val_size": v,
                "minibatch": minibatch}

    def _projected_teleprompter_calls(self, program, trainset, valset) -> dict[str, int]:
        plan = self.plan(program, trainset, valset)
        c = self._calls_per_run(program)
        p = self._prompt_call()
        n_pred = max(1, len(program.predictors()))
        n_train = len(trainset) if valset else len(trainset) - plan["val_size"]
        # bootstrap: DSPy's create_n_fewshot_demo_sets loops seeds -3 .. D-4
        boot_sets = 0
        if self.max_bootstrapped_demos > 0:
            for s in range(-3, plan["demo_sets"] - 3):
                if s == -3 or (s == -2 and self.max_labeled_demos > 0):
                    continue
                boot_sets += 1
        bootstrap = boot_sets * max(0, n_train) * c
        summary = 0
        if self.data_aware_proposer:
            batches = math.ceil(max(1, n_train) / self.view_data_batch_size)
            summary = 2 + min(max(0, batches - 1), 9)
        per_instruction = 1 + (2 if self.program_aware_proposer else 0)
        proposals = (summary + n_pred * plan["instructions"] * per_instruction) * p
        v, t = plan["val_size"], plan["trials"]
        if plan["minibatch"]:
            search = v * c + t * self.minibatch_size * c + (t // self.minibatch_full_eval_steps + 2) * v * c
        else:
            search = v * c + t * v * c
        return {"bootstrap": bootstrap, "proposals": proposals, "search": search}

    def _run(self, student, trainset, valset):
        plan = self.plan(student, trainset, valset)
        cls = _guarded_mipro_class()
        tp = cls(metric=self.metric, prompt_model=self.prompt_lm, task_model=None,
                 max_bootstrapped_demos=self.max_bootstrapped_demos, max_labeled_demos=self.max_labeled_demos,
                 auto=None, num_candidates=plan["demo_sets"], num_threads=self.num_threads,
                 max_errors=self.max_errors, seed=self.seed, init_temperature=self.init_temperature,
                 verbose=False, track_stats=False, metric_threshold=self.metric_threshold)
        tp.num_instruct_candidates = plan["instructions"]
        tp.num_fewshot_candidates = plan["demo_sets"]
        if valset and len(valset) > plan["val_size"]:
            valset = random.Random(self.seed).sample(list(valset), plan["val_size"])
        if self.max_bootstrapped_demos == 0:
            self._guards.append("max_bootstrapped_demos=0: demo candidate sets built without bootstrapping "
                                "(DSPy's create_n_fewshot_demo_sets crashes on randint(1, 0) or swaps in 3 demos)")
        return tp.compile(student, trainset=trainset, valset=valset, num_trials=plan["trials"], seed=self.seed,
                          minibatch=plan["minibatch"],
                          minibatch_size=min(self.minibatch_size, len(valset) if valset else self.minibatch_size),
                          minibatch_full_eval_steps=self.minibatch_full_eval_steps,
                          program_aware_proposer=self.program_aware_proposer,
                          data_aware_proposer=self.data_aware_proposer,
                          view_data_batch_size=self.view_data_batch_size,
                          tip_aware_proposer=self.tip_aware_proposer,
                          fewshot_aware_proposer=self.fewshot_aware_proposer)


__all__ = ["MIPROv2"]
