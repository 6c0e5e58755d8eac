"""The option-follows stage in Python: the same declaration as stage.toml, plus a strategy of
our own. Use it as `personalign compare examples/own_task/my_task.py:STAGE --data ...`."""

import dspy

from personalign import declare_stage


class WordOverlap(dspy.Module):
    """LM-free: follows unless the option repeats a word the preference rules out."""

    uses_lm = False
    NEGATIONS = ("never", "no", "not", "avoid", "hate", "can't", "cannot", "allergic", "don't")

    def forward(self, preference: str, question: str, option: str) -> dspy.Prediction:
        words = [w.strip(".,;").lower() for w in preference.split()]
        negated = any(w in self.NEGATIONS for w in words)
        banned = {w for w in words if len(w) > 3} if negated else set()
        hits = {w.strip(".,;").lower() for w in option.split()} & banned
        return dspy.Prediction(follows=not hits)


STAGE = declare_stage(
    name="option-follows",
    summary="Does a recommended option follow the user's stated preference?",
    instructions="Decide whether the recommended option respects the user's stated preference.",
    kind="binary",
    label="follows",
    group_key="topic",
    objective="f1",
    inputs={"preference": "the user's stated preference", "question": "the user's request",
            "option": "one recommended option"},
    output={"name": "follows", "type": "bool", "description": "true if the option follows the preference"},
    strategies={"word-overlap": WordOverlap},
)
