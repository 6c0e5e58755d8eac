"""Conformance suites a new stage or optimizer subclasses (pytest collects the subclass; the base
classes are not collected because their names do not start with ``Test``)::

    from personalign.testing import OptimizerTestCase, StageTestCase

    class TestMyOptimizer(OptimizerTestCase):
        optimizer = "my-optimizer"          # its name in personalign.optimizers.OPTIMIZERS
        settings = {"max_rounds": 1}        # CPU-tiny settings

    class TestMyStage(StageTestCase):
        stage = "my-stage"                  # a stage reference: a built-in name, "stage.toml", "file.py:STAGE"
        def examples(self):                 # a tiny fixture: dspy.Examples with inputs marked,
            return [...]                    # ``split`` "train" (fits) and anything else (scored)

:class:`StageTestCase` runs every strategy of the stage on the fixture (LLM strategies under
:class:`~personalign.testing.dummies.SchemaDummyLM`; trainable ones fitted first with their
default optimizer) and checks that the prediction carries the stage's output field, that no
example fails, that a forward pass makes no more LM calls than the program declares
(``lm_calls_per_run``, else one per predictor; :mod:`personalign.optimizers.budget`), and that
the stage's metric is in [0, 1]. :class:`OptimizerTestCase` checks the compile contract
(keyword-only, input unchanged, same seed -> same state), the LM-call budget (actual <= projected,
no exception) and that a constant program never wins on an imbalanced task. This module imports
pytest; nothing here reaches the network.
"""

from __future__ import annotations

import inspect
import json

import pytest

from personalign.testing.dummies import SchemaDummyLM


class PredictorCalls:
    """A DSPy callback counting the ``dspy.Predict`` calls made inside ``dspy.context(callbacks=[...])``."""

    def __init__(self) -> None:
        self.calls = 0

    def on_module_start(self, call_id, instance, inputs):
        import dspy

        if isinstance(instance, dspy.Predict):
            self.calls += 1

    def __getattr__(self, name):  # the other BaseCallback hooks: no-ops
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


def _state(program) -> str:
    return json.dumps(program.dump_state(), sort_keys=True, default=str)


def _parametrized(names: list[str], slow, body):
    def test_strategy(self, strategy):
        body(self, strategy)

    test_strategy.__doc__ = body.__doc__
    params = [pytest.param(n, marks=pytest.mark.slow) if n in slow else n for n in names]
    return pytest.mark.parametrize("strategy", params)(test_strategy)


class StageTestCase:
    """Every strategy of :attr:`stage` on :meth:`examples` (see the module docstring).

    Attributes:
        stage: a stage reference (:func:`personalign.stages.resolve_stage`: a built-in
            name, a stage file, ``file.py:ATTR``, ...; subclasses set it; the base class runs nothing).
        skip: ``{strategy: reason}`` strategies not run here (e.g. fine-tuning a cross-encoder).
        slow: strategies marked ``slow`` besides those that read log-probabilities (``needs_logprobs``:
            the tiny embedded model, :meth:`make_lm`).
        n_boot: bootstrap resamples of the report's CIs.
    """

    stage: str = ""
    skip: dict[str, str] = {}
    slow: tuple[str, ...] = ()
    n_boot: int = 50

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.stage:
            from personalign.stages import resolve_stage

            registry = resolve_stage(cls.stage).registry
            logprobs = {n for n in registry.names() if getattr(registry.load(n), "needs_logprobs", False)}
            cls.test_strategy = _parametrized(registry.names(), set(cls.slow) | logprobs, StageTestCase._check_strategy)

    def examples(self) -> list:
        """The tiny fixture: ``dspy.Example`` objects with the stage's inputs and label."""
        raise NotImplementedError

    def make_lm(self, strategy: str):
        """The LM of LLM strategy ``strategy``: a fresh :class:`SchemaDummyLM`; for a strategy that
        reads next-token log-probabilities (its class says ``needs_logprobs``; marked ``slow``) the
        tiny embedded model."""
        from personalign.stages import resolve_stage

        if getattr(resolve_stage(self.stage).registry.load(strategy), "needs_logprobs", False):
            from personalign.lm import TINY_MODEL, make_lm

            return make_lm(TINY_MODEL)
        return SchemaDummyLM()

    def _check_strategy(self, strategy):
        """The strategy fits (if trainable), predicts the output field for every example with no
        failure and within its declared LM calls, and scores in [0, 1]."""
        import dspy

        from personalign.evaluation import evaluate_stage
        from personalign.lm import use
        from personalign.optimizers.budget import predictor_calls
        from personalign.stages import resolve_stage

        if strategy in self.skip:
            pytest.skip(self.skip[strategy])
        st = resolve_stage(self.stage)
        info = st.registry.info(strategy)
        examples = self.examples()
        train = [e for e in examples if getattr(e, "split", None) == "train"] or examples
        scored = [e for e in examples if getattr(e, "split", None) != "train"] or examples
        lm = self.make_lm(strategy) if info.uses_lm else None
        program = st.registry.create(strategy)
        with use(lm):
            if info.trainable:
                program, _ = st.default_optimizer(strategy, seed=0).compile(program, trainset=train)
            counter = PredictorCalls()
            with dspy.context(callbacks=[*(dspy.settings.callbacks or []), counter]):
                pred = program(**{k: getattr(scored[0], k) for k in st.inputs})
        assert getattr(pred, st.output, None) is not None, f"{strategy}: no '{st.output}' in {pred}"
        declared = predictor_calls(program, examples=[scored[0]])
        assert counter.calls <= declared, (f"{strategy}: one forward pass called its predictors {counter.calls} "
                                           f"times, more than the {declared} it declares; set lm_calls_per_run")
        report = evaluate_stage(st, program, scored, lm=lm, n_boot=self.n_boot, progress=False)
        assert report["failures"] == 0, report["errors"]
        value = report["f1"] if st.kind == "binary" else report[st.metric_name]
        assert 0.0 <= value <= 1.0, (strategy, value)


class OptimizerTestCase:
    """The conformance checks of one registered optimizer of kind ``teleprompter`` (see the module
    docstring), on the packaged relevance demo (8 train / 6 val) with ``ZeroShotJudge``.

    Attributes:
        optimizer: the optimizer's registered name (subclasses set it).
        settings: CPU-tiny settings for it.
        zero_demo_settings: settings asking for no demos (None: that check is skipped).
    """

    optimizer: str = ""
    settings: dict = {}
    zero_demo_settings: dict | None = None

    # the task's metric and label: the relevance stage's (wrappers have no stage defaults)
    @staticmethod
    def task_kwargs() -> dict:
        from personalign.stages import resolve_stage

        return resolve_stage("relevance").teleprompter_kwargs()

    @staticmethod
    def program():
        from personalign.stages import resolve_stage

        return resolve_stage("relevance").registry.create("zero-shot")

    def make_lm(self):
        return SchemaDummyLM()

    def create(self, **overrides):
        from personalign.optimizers import OPTIMIZERS

        return OPTIMIZERS.create(self.optimizer, **{**self.task_kwargs(), "seed": 0, "n_boot": 200,
                                                    **self.settings, **overrides})

    @pytest.fixture
    def task(self):
        from personalign.testing.tasks import relevance_task

        return relevance_task()

    def check_compile_info(self, info: dict) -> None:
        """Optimizer-specific checks of the compile-service info of the imbalanced task (override)."""

    def test_compile_is_keyword_only(self):
        import dspy

        from personalign.optimizers import OPTIMIZERS

        cls = OPTIMIZERS.load(self.optimizer)
        params = inspect.signature(cls.compile).parameters
        assert params["trainset"].kind is inspect.Parameter.KEYWORD_ONLY
        assert params["valset"].kind is inspect.Parameter.KEYWORD_ONLY
        with pytest.raises(TypeError):
            self.create().compile(self.program(), [dspy.Example(attribute="a", prompt="b", relevant=True)])
        with pytest.raises(TypeError):  # every setting in __init__: the constructor is keyword-only too
            cls(0)
        assert set(self.create().get_params()) >= {"seed", "metric", "lm"} | set(self.settings)

    def test_contract_seed_and_budget(self, task):
        import dspy

        from personalign.optimizers import CompileResult

        train, val = task
        program, lm, events = self.program(), self.make_lm(), []
        before = _state(program)
        opt = self.create(lm=lm, on_event=lambda k, p: events.append((k, p)))
        assert opt.config()["seed"] == 0
        compiled, result = opt.compile(program, trainset=train, valset=val)

        assert isinstance(compiled, dspy.Module) and compiled is not program
        assert isinstance(result, CompileResult)
        assert _state(program) == before, "the input program was modified"
        assert result.optimizer == self.optimizer and result.seed == 0 and result.config["seed"] == 0
        assert result.score_before is not None and result.score_after is not None
        lo, hi = result.score_after_ci
        assert lo <= result.score_after <= hi
        assert result.lm_calls == result.actual_lm_calls == len(lm.calls) > 0
        assert result.actual_lm_calls <= result.projected_lm_calls, result.details.get("over_budget_reason")
        assert "over_budget_reason" not in result.details
        assert [k for k, _ in events] == ["projected", "actual"]
        assert events[0][1]["projected_lm_calls"] == result.projected_lm_calls
        assert opt.projected_lm_calls(program, train, val) == result.projected_lm_calls
        json.dumps(result.to_dict())  # JSON-serializable for tracking
        with dspy.context(lm=lm):
            pred = compiled(attribute=val[0].attribute, prompt=val[0].prompt)
        assert isinstance(pred.relevant, bool)
        # same seed -> same compiled state (a fresh LM: no shared state between the runs)
        again, _ = self.create(lm=self.make_lm()).compile(self.program(), trainset=train, valset=val)
        assert _state(again) == _state(compiled)

    def test_budget_holds_for_a_program_that_declares_repeated_calls(self, task):
        """A program calling its predictor three times per forward declares ``lm_calls_per_run = 3``;
        the projection then covers it (actual <= projected), with no over-budget reason."""
        train, val = task
        program = _thrice_judge()
        lm = self.make_lm()
        _, result = self.create(lm=lm).compile(program, trainset=train, valset=val)
        assert result.actual_lm_calls == len(lm.calls) > 0
        assert result.actual_lm_calls <= result.projected_lm_calls, result.details.get("over_budget_reason")

    def test_demo_limit_zero_gives_no_demos(self, task):
        if self.zero_demo_settings is None:
            pytest.skip(f"{self.optimizer}: no zero-demo settings given")
        train, val = task
        compiled, result = self.create(lm=self.make_lm(), score=False, **self.zero_demo_settings).compile(
            self.program(), trainset=train, valset=val)
        assert all(len(p.demos) == 0 for p in compiled.predictors()), result.details
        assert set(result.details["demos"].values()) == {0}
        assert result.actual_lm_calls <= result.projected_lm_calls

    def test_no_constant_winner_on_an_imbalanced_task(self):
        from personalign.stages import resolve_stage
        from personalign.testing.tasks import check_no_constant_winner

        self.check_compile_info(check_no_constant_winner(resolve_stage("relevance"), self.optimizer,
                                                         dict(self.settings)))


def _thrice_judge():
    from personalign.stages import resolve_stage

    base = type(resolve_stage("relevance").registry.create("zero-shot"))

    class ThriceJudge(base):
        """Calls its one predictor three times per forward, and says so."""

        lm_calls_per_run = 3

        def forward(self, attribute, prompt):
            for _ in range(2):
                self.judge(attribute=attribute, prompt=prompt + " ")
            return super().forward(attribute, prompt)

    return ThriceJudge()


__all__ = ["OptimizerTestCase", "StageTestCase"]
