"""lm-probe: the verdict-position hidden state and its linear probe.

Fast tests replace the hidden states with synthetic ones (the probe's fitting, C choice,
save/load without pickle, refusals); the slow test runs the real embedded model and checks that
reading the hidden state leaves the yes/no margin unchanged.
"""

from __future__ import annotations

import dspy
import numpy as np
import pytest

from personalign.stages import resolve_stage

STRATEGIES = resolve_stage("relevance").registry

from personalign.programs.relevance import probe


def synthetic(n_prompts=4, users=4, per_user=8, d=24, seed=0):
    """Pairs whose hidden state carries the label along one direction, plus a per-prompt shift."""
    rng = np.random.default_rng(seed)
    rows, states = [], {}
    direction = rng.normal(size=d)
    for p in range(n_prompts):
        shift = rng.normal(0, 2.0, size=d)
        for u in range(users):
            for j in range(per_user):
                gold = j < 2
                ex = dspy.Example(attribute=f"a{p}-{u}-{j}", prompt=f"prompt {p}", prompt_id=f"p{p}", user_id=f"u{u}",
                                  relevant=gold).with_inputs("attribute", "prompt")
                states[ex.attribute] = shift + (1.2 if gold else 0.0) * direction + rng.normal(0, 1.0, size=d)
                rows.append(ex)
    return rows, states


@pytest.fixture
def fake_states(monkeypatch):
    rows, states = synthetic()
    monkeypatch.setattr(probe, "hidden_states", lambda model, examples: np.vstack([states[e.attribute] for e in examples]))
    return rows


def test_probe_chooses_C_by_leave_one_prompt_out_and_separates_new_prompts(fake_states):
    from sklearn.metrics import roc_auc_score

    rows = fake_states
    train, test = [r for r in rows if r.prompt_id != "p3"], [r for r in rows if r.prompt_id == "p3"]
    prog = probe.LMProbe(model="local/qwen2.5-coder-0.5b-instruct").fit(train)
    assert prog.C in probe.C_GRID and set(prog.cv["C_grid_mean_auc"]) == {str(c) for c in probe.C_GRID}
    assert prog.n_embd == 24
    auc = roc_auc_score([r.relevant for r in test], prog.score_batch(test))
    assert auc > 0.85


def test_probe_compiles_with_a_decision_rule_and_saves_without_pickle(fake_states, tmp_path):
    from personalign._verbs.relevance import load_program, save_program

    rows = fake_states
    opt = resolve_stage("relevance").default_optimizer("lm-probe", seed=0)
    prog = STRATEGIES.create("lm-probe")
    prog.model = "local/qwen2.5-coder-0.5b-instruct"
    compiled, res = opt.compile(prog, trainset=rows[:96], valset=rows[96:])
    assert res.details["decision_rule"] is not None and len(res.details["decision_rule"]["per_group"]) == 3
    assert res.val_score > 0.5
    save_program(compiled, tmp_path, strategy="lm-probe", compile_info=res.to_dict())
    with np.load(tmp_path / "lm_probe.npz", allow_pickle=False) as z:
        assert z["coef"].shape == (24,)
    loaded, meta = load_program(tmp_path)
    test = rows[96:]
    assert loaded.score_batch(test) == pytest.approx(compiled.score_batch(test))
    assert [p.relevant for p in loaded.predict_batch(test)] == [p.relevant for p in compiled.predict_batch(test)]


def test_probe_refuses_a_server_model():
    from personalign.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="embedded model"):
        probe.LMProbe(model="openai/gpt-4o-mini").fit([dspy.Example(attribute="a", prompt="p", relevant=True)])
    from personalign.lm.probe import margin_and_hidden

    with pytest.raises(ConfigurationError, match="embedded model"):
        margin_and_hidden("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}])


@pytest.mark.slow
def test_margins_are_unchanged_with_the_probe_on():
    """Reading the hidden state (embeddings on for the last token only) gives the same yes/no
    margin as the plain scorer, before and after it (the logits row is the last output's)."""
    from personalign.lm.probe import margin_and_hidden
    from personalign.lm.scoring import relevance_messages, yes_no_margin

    model = "local/qwen2.5-coder-0.5b-instruct"
    prompt = "How do I plan a week of dinners on a budget?"
    attrs = ["The user is vegetarian.", "The user values concise answers.", "The user plays chess."]
    for a in attrs:
        msgs = relevance_messages(a, prompt)
        before = yes_no_margin(model, msgs)
        m, h = margin_and_hidden(model, msgs)
        after = yes_no_margin(model, msgs)
        # not bit-exact: llama.cpp's quantized kernels round differently when the last token is a
        # batch of its own (the plain scorer does the same whenever the KV cache holds the rest);
        # measured 0.025 nats on the 0.5B model -- far below the margins' spread within a prompt
        assert m == pytest.approx(before, abs=0.05) and after == pytest.approx(before, abs=0.05)
        assert h.shape == (896,) and np.isfinite(h).all() and np.linalg.norm(h) > 0
    # different pairs give different hidden states
    h1 = margin_and_hidden(model, relevance_messages(attrs[0], prompt))[1]
    h2 = margin_and_hidden(model, relevance_messages(attrs[2], prompt))[1]
    assert not np.allclose(h1, h2)


def test_ensemble_stacks_the_probe_out_of_fold_and_saves_it(fake_states, monkeypatch, tmp_path):
    """``probe=True``: a third stacker input (the probe's out-of-fold logit), carried by the
    synthetic hidden states (the margin is noise here); the
    probe member's head is saved as lm_probe.npz and read back to the same scores."""
    from personalign.programs.relevance import ensemble
    from personalign.programs.relevance.learned import MiniLMLogReg

    rows = fake_states
    rng = np.random.default_rng(1)
    noise = {r.attribute: float(rng.normal()) for r in rows}
    monkeypatch.setattr(ensemble, "margins", lambda model, examples: [noise[e.attribute] for e in examples])
    train, test = [r for r in rows if r.prompt_id != "p3"], [r for r in rows if r.prompt_id == "p3"]
    model = "local/qwen2.5-coder-0.5b-instruct"
    prog = ensemble.EnsembleRank(model=model, learned=MiniLMLogReg(), probe=True, threshold=0.5).fit(train)
    from sklearn.metrics import roc_auc_score

    assert len(prog.stacker["coef"]) == 3 and prog.stacker["coef"][2] > 0
    assert isinstance(prog.probe, probe.LMProbe) and prog.probe.n_embd == 24
    plain = ensemble.EnsembleRank(model=model, learned=MiniLMLogReg(), threshold=0.5).fit(train)
    assert len(plain.stacker["coef"]) == 2 and plain.probe is None
    gold = [r.relevant for r in test]
    assert roc_auc_score(gold, prog.score_batch(test)) > 0.8
    state = prog.dump_state()
    prog.save_weights(tmp_path)
    assert (tmp_path / probe.WEIGHTS_FILE).is_file()
    back = ensemble.EnsembleRank(model=model, learned=MiniLMLogReg()).load_state(state).load_weights(tmp_path)
    assert back.score_batch(test) == pytest.approx(prog.score_batch(test))


def test_probe_fits_on_a_single_prompt_without_choosing_C(fake_states):
    """A nested fold of a stack can hold one prompt: no leave-one-prompt-out to choose C on, so
    the middle of the grid is used and the CV record says so."""
    rows = [r for r in fake_states if r.prompt_id == "p0"]
    prog = probe.LMProbe(model="local/qwen2.5-coder-0.5b-instruct").fit(rows)
    assert prog.C == probe.C_GRID[len(probe.C_GRID) // 2] and "one prompt" in prog.cv["note"]
    assert len(prog.score_batch(rows)) == len(rows)
