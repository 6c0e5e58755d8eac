"""Every strategy of every stage on a tiny fixture, through the shipped suite
:class:`personalign.testing.StageTestCase` (LLM strategies under ``SchemaDummyLM``; trainable
strategies fitted with their default optimizer first): the output field is predicted for every
example without failure, a forward pass stays within the LM calls the program declares, and the
stage's metric is in [0, 1]."""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest

from personalign.stages import all_stages
from personalign.testing import StageTestCase

pytestmark = pytest.mark.filterwarnings("ignore:The custom-engine complete_legacy:DeprecationWarning")

ROOT = Path(__file__).resolve().parents[2]
CONV = [
    {"role": "user", "content": "I only eat vegan food. Can you suggest a dinner?"},
    {"role": "assistant", "content": "Sure: a lentil curry with rice."},
    {"role": "user", "content": "Thanks! I also run marathons every spring, so something with protein."},
    {"role": "assistant", "content": "Add tofu."},
]
EVIDENCE = ("User: I have been vegan for ten years and I cook every evening.\n\n"
            "Assistant: That is great! Do you want recipes?\n\n"
            "User: Yes please, something quick. I also train for marathons, so high protein helps.")
OTHER = "User: My cat keeps scratching the sofa. Any advice?\n\nUser: I live in a small flat, so space is tight."


def test_every_stage_has_a_suite():
    suites = {cls.stage for cls in StageTestCase.__subclasses__() if cls.stage}
    assert set(all_stages()) <= suites  # (a user's stage file may have its suite too: tests/stages)


class TestRelevanceStage(StageTestCase):
    stage = "relevance"
    skip = {"cross-encoder": "fine-tunes a MiniLM cross-encoder (minutes on CPU): tests/programs/test_relevance_strategies.py"}

    def examples(self):
        from personalign.stages import resolve_stage as get_stage

        rows = get_stage(self.stage).load(ROOT / "examples" / "relevance_demo.jsonl")
        train = []  # 2 positives and 2 negatives of each of the 4 train prompts (grouped CV needs groups)
        for pid in sorted({e.prompt_id for e in rows if e.split == "train"}):
            for label in (True, False):
                train += [e for e in rows if e.split == "train" and e.prompt_id == pid and e.relevant is label][:2]
        return train + [e for e in rows if e.split == "val"][:6]


class TestVerificationStage(StageTestCase):
    stage = "verification"

    def examples(self):
        rows = []
        for i, (ev, attr, ok) in enumerate([(EVIDENCE, "The user is vegan.", True),
                                            (EVIDENCE, "The user runs marathons.", True),
                                            (OTHER, "The user is vegan.", False),
                                            (OTHER, "The user has a cat.", True),
                                            (EVIDENCE, "The user owns a cat.", False),
                                            (OTHER, "The user trains for marathons.", False)] * 2):
            rows.append(dspy.Example(evidence=ev, attribute=attr, reason="", accepted=ok, group=f"g{i % 4}",
                                     split="train" if i < 8 else "val").with_inputs("evidence", "attribute", "reason"))
        return rows


class TestJudgeStage(StageTestCase):
    stage = "judge"

    def examples(self):
        from personalign.stages import resolve_stage as get_stage

        inputs = get_stage(self.stage).inputs
        rows = []
        for i in range(6):
            rows.append(dspy.Example(profile="A vegan marathon runner.", prompt=f"Suggest a dinner, take {i}.",
                                     response_a="A lentil curry with tofu.", response_b="A steak with fries.",
                                     attributes=["The user is vegan.", "The user runs marathons."],
                                     ratings={"The user is vegan.": 1 + i % 5, "The user runs marathons.": 3},
                                     prompt_id=f"p{i % 3}", split="train" if i < 3 else "val").with_inputs(*inputs))
        return rows


class TestMCQStage(StageTestCase):
    stage = "mcq"

    def examples(self):
        from personalign.stages import resolve_stage as get_stage

        return get_stage(self.stage).load(ROOT / "tests" / "fixtures" / "personamem" / "questions_tiny.csv")


class TestRespondStage(StageTestCase):
    stage = "respond"

    def examples(self):
        from personalign.stages import resolve_stage as get_stage

        inputs = get_stage(self.stage).inputs
        return [dspy.Example(prompt=q, question=q, attributes=[a], preference=a, prompt_id=f"p{i}",
                             split="val").with_inputs(*inputs)
                for i, (q, a) in enumerate([("Where should I eat in Rome?", "I only eat vegan food."),
                                            ("Plan my weekend.", "I prefer quiet activities.")])]


class TestViolationStage(StageTestCase):
    stage = "violation"

    def examples(self):
        from personalign.stages import resolve_stage as get_stage

        inputs = get_stage(self.stage).inputs
        rows = [("I only eat vegan food.", "Where should I eat in Rome?", "Try the vegan trattoria.", False),
                ("I only eat vegan food.", "Where should I eat in Rome?", "Order the veal.", True),
                ("I hate early mornings.", "Plan my Saturday.", "Sleep in, then brunch at 11.", False),
                ("I hate early mornings.", "Plan my Saturday.", "Start with a 6 am run.", True)] * 2
        # two topics in train: a learned strategy's threshold is fitted by grouped CV over topics
        return [dspy.Example(preference=p, question=q, response=r, violates=v, topic=f"t{(i // 2) % 2}",
                             pair_id=f"p{i // 2}", split="train" if i < 4 else "val").with_inputs(*inputs)
                for i, (p, q, r, v) in enumerate(rows)]


class TestExtractionStage(StageTestCase):
    stage = "extraction"

    def examples(self):
        from personalign.preprocess import normalize_turns
        from personalign.stages import resolve_stage as get_stage

        inputs = get_stage(self.stage).inputs
        return [dspy.Example(conversation=normalize_turns(CONV), gold_attributes=["I only eat vegan food."],
                             group=f"c{i}", split="val").with_inputs(*inputs) for i in range(2)]


class TestPerspectivesStage(StageTestCase):
    stage = "perspectives"

    @pytest.fixture(autouse=True)
    def _bank(self, tmp_path):
        bank = tmp_path / "profiles.jsonl"
        bank.write_text("".join(json.dumps({"user_id": f"u{i}", "bio": bio, "descriptors": []}) + "\n" for i, bio in
                                enumerate(["A pediatric nurse who hikes on weekends.",
                                           "A software engineer and trail runner.",
                                           "A retired teacher who walks her dog every morning."])))
        self.bank = str(bank)

    def examples(self):
        from personalign.stages import resolve_stage as get_stage

        inputs = get_stage(self.stage).inputs
        return [dspy.Example(question=q, profile_bank=self.bank, reference="Water and a map.", prompt_id=f"q{i}",
                             split="val").with_inputs(*inputs)
                for i, q in enumerate(["What should I pack for a day hike?", "Name three good breakfast foods."])]
