"""GridLogitsProcessor (mode 2) and the mode-1 model loop, with SmolLM2-135M-Instruct on CPU.

Every output is checked against grid-spec, not against grid-core: the spec's
``Language`` of the role's projected grammar and lexicon words decides that
the text is a sentence (lexicon words only, so no table or column outside the
role's grants), and the SemanticChecker's analysis lists the tables used and
the statement form, which must be granted. Audit logs must verify and replay.
"""

from __future__ import annotations

import math
import queue
import random
import threading
import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import LogitsProcessor, StoppingCriteria  # noqa: E402

from grid_core.errors import GuideError, ServingError  # noqa: E402
from grid_core.guide import Engine  # noqa: E402
from grid_core.replay import replay  # noqa: E402
from grid_core.vocab import ByteIncompleteWarning  # noqa: E402
from grid_serve.text2sql import RoleEngine, prompt_ids, schema_ddl  # noqa: E402
from grid_serve.torch import apply_bitmask_  # noqa: E402
from grid_serve.transformers import (  # noqa: E402
    GridLogitsProcessor,
    constrained_generate,
    decode_with_model,
)
from grid_spec.spec import Language  # noqa: E402
from grid_sql.checker import SemanticChecker, parse_statement  # noqa: E402
from grid_sql.dialects import SQLITE  # noqa: E402
from grid_sql.projection import dialect_dfa  # noqa: E402
from grid_sql.schema import SchemaSnapshot  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::grid_core.vocab.ByteIncompleteWarning")

MAX_NEW_TOKENS = 48

# (role, question): one per role shape (two tables, writes allowed, one table and no joins).
QUESTIONS = {
    "analyst-names": ("analyst", "List the names of all employees."),
    "clerk-total": ("clerk", "What is the total of all orders?"),
    "intern-budget": ("intern", "What is the budget of each department?"),
}
FORMS = {"select_stmt": "SELECT", "insert_stmt": "INSERT", "update_stmt": "UPDATE"}
FORMS["delete_stmt"] = "DELETE"

_LANGUAGES: dict[str, Language] = {}


def language(role: RoleEngine) -> Language:
    """grid-spec's L for the role: projected grammar, lexicon words (cached per role)."""
    if role.role not in _LANGUAGES:
        _LANGUAGES[role.role] = Language(
            role.projection.grammar.to_lark(), role.lexicon.word_lists()
        )
    return _LANGUAGES[role.role]


def assert_in_role(text: bytes, role: RoleEngine, schema: SchemaSnapshot) -> None:
    """``text`` is a sentence of the role's language, naming granted tables and verbs only."""
    assert language(role).in_language(text), text
    tables = {t.name: t.column_names for t in schema.tables}
    analysis = SemanticChecker(tables, {}).analyze(text)
    granted = set(role.grants.tables)
    assert {u.table for u in analysis.tables} <= granted, text
    forms = {t.data for t in parse_statement(text).iter_subtrees() if t.data in FORMS}
    assert {FORMS[f] for f in forms} <= role.grants.verbs, text


def prompt(lm: Any, role: RoleEngine, schema: SchemaSnapshot, question: str) -> list[int]:
    return prompt_ids(lm.tokenizer, question, schema_ddl(schema, role.grants))


class Saboteur(LogitsProcessor):  # type: ignore[misc]
    """A processor after the mask: at its call ``at``, row 0 may only take ``forced``,
    the first id the mask blocks that is not special (a token outside the mask)."""

    def __init__(self, at: int, special: Any) -> None:
        self.at, self.special, self.calls = at, special, 0
        self.forced: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.calls += 1
        if self.calls == self.at:
            blocked = torch.isinf(scores[0]).nonzero().flatten().tolist()
            self.forced = next(i for i in blocked if i not in self.special)
            scores[0] = float("-inf")
            scores[0, self.forced] = 0.0
        return scores


@pytest.mark.parametrize(("role_name", "question"), list(QUESTIONS.values()), ids=list(QUESTIONS))
def test_mode2_outputs_are_sentences_of_the_role(
    lm: Any, engines: Any, schema: SchemaSnapshot, role_name: str, question: str
) -> None:
    role = engines[role_name]
    outcomes, _ = constrained_generate(
        lm.model,
        [role.engine.guide()],
        [prompt(lm, role, schema, question)],
        MAX_NEW_TOKENS,
        stop_on_exit=True,
    )
    (out,) = outcomes
    assert out.error is None
    assert out.stop_reason == "eos", out.text  # greedy, one thread: deterministic
    assert out.complete and out.tokens[-1] in lm.vocab.eos_ids
    assert_in_role(out.text, role, schema)
    seal = out.audit.seal
    assert seal is not None and seal["mode"] == {"mode": 2, "budget": MAX_NEW_TOKENS}
    assert len(out.audit.records) == len(out.tokens)
    verdict = replay(out.audit.lines(), role.engine)
    assert verdict.ok, verdict


def test_event_streamer_yields_text_and_the_statements_events(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """The streamer's text is the row's text; its events are the post-hoc events of
    the statement, the table's before the statement's last text piece."""
    from grid_core.events import tracker
    from grid_serve.text2sql import DIALECT
    from grid_serve.transformers import EventStreamer
    from grid_sql.dialects import get_dialect
    from grid_sql.events import event_spec

    role = engines["analyst"]
    spec = event_spec(get_dialect(DIALECT), role.engine.grammar)
    streamer = EventStreamer(role.engine, spec)
    question = "Which departments have a budget over 300000?"
    (out,), _ = constrained_generate(
        lm.model,
        [role.engine.guide()],
        [prompt(lm, role, schema, question)],
        MAX_NEW_TOKENS,
        stop_on_exit=True,
        streamer=streamer,
    )
    assert out.error is None and out.stop_reason == "eos", out.text
    items = list(streamer)
    assert "".join(x for kind, x in items if kind == "text").encode() == out.text
    events = [x for kind, x in items if kind == "event"]
    written = out.text
    assert [e.key for e in events] == [e.key for e in tracker(role.engine, spec).parse(written)]
    kinds = [kind for kind, _ in items]
    first_table = next(i for i, (k, x) in enumerate(items) if k == "event" and x.kind == "table")
    assert first_table < len(kinds) - 1 - kinds[::-1].index("text")


def test_applied_mask_is_the_guides_mask_at_every_step(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """No approximation: the finite logits at each step are exactly ``mask_ids()``."""

    class Record(LogitsProcessor):
        def __init__(self) -> None:
            self.steps: list[list[int]] = []

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            self.steps.append(torch.isfinite(scores[0]).nonzero().flatten().tolist())
            return scores

    role = engines["analyst"]
    record = Record()
    question = "Which departments have a budget over 300000?"
    (out,), _ = constrained_generate(
        lm.model,
        [role.engine.guide()],
        [prompt(lm, role, schema, question)],
        24,
        after=[record],
    )
    assert out.error is None and len(record.steps) == len(out.tokens) > 0
    guide = role.engine.guide()
    for step, (applied, token) in enumerate(zip(record.steps, out.tokens, strict=True)):
        assert applied == guide.mask_ids(), f"step {step}"
        guide.accept_token(token)
    if out.stop_reason == "truncated":
        assert language(role).is_viable_prefix(out.text)
        assert out.audit.seal is not None and out.audit.seal["stop_reason"] == "truncated"


@pytest.mark.parametrize("layout", ["float32", "float64", "bfloat16", "strided"])
def test_every_logits_layout_is_masked_alike(lm: Any, engines: Any, layout: str) -> None:
    """The processor masks contiguous CPU float32 logits through their numpy view and the
    kernels, any other dtype or layout through torch. Along a statement, with the
    exit-intent stop on, fails if the finite columns differ from the guide's mask in
    any layout, or if, where EOS is legal and the model's top token is refused, the
    row is not EOS only."""
    role = engines["analyst"]
    eos = sorted(lm.vocab.eos_ids)
    width = lm.model.config.vocab_size
    proc = GridLogitsProcessor([role.engine.guide()], stop_on_exit=True)
    reference = role.engine.guide()
    tokens = lm.tokenizer.encode("SELECT name FROM employees;", add_special_tokens=False)
    generator = torch.Generator().manual_seed(7)
    ids = torch.zeros((1, 3), dtype=torch.long)
    for step in range(len(tokens) + 1):
        admitted = reference.mask_ids()
        logits = torch.randn((width, 1), generator=generator).t()  # a column: strided
        exiting = step == len(tokens)
        if exiting:  # EOS is legal; the top token is one the mask refuses
            assert reference.eos_allowed()
            logits[0, next(t for t in range(width) if t not in set(admitted))] = 100.0
        if layout != "strided":
            logits = logits.contiguous().to(getattr(torch, layout))
        out = proc(ids, logits)
        finite = torch.isfinite(out[0]).nonzero().flatten().tolist()
        assert finite == (eos if exiting else admitted), (layout, step)
        if not exiting:
            ids = torch.cat([ids, torch.tensor([[tokens[step]]])], dim=1)
            reference.accept_token(tokens[step])


def test_the_adapters_run_on_the_native_guide_and_match_python(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """Fails if the processor (or ``for_engine``) runs on the Python guide while
    grid-kernels is installed, or if the native guide's mode-2 outcome or mode-1
    generation (tokens, audit lines, seal) differs from the Python guide's."""
    pytest.importorskip("grid_kernels._native")
    from grid_core.guide import GridGuide
    from grid_core.kernels import KernelGuide

    role = engines["analyst"]
    assert all(
        isinstance(g, KernelGuide) for g in GridLogitsProcessor.for_engine(role.engine, 2).guides
    )
    ids = prompt(lm, role, schema, "How many departments are there?")
    guides = (role.engine.guide(), GridGuide(role.engine))
    mode2 = [constrained_generate(lm.model, [g], [ids], 24)[0][0] for g in guides]
    assert mode2[0].tokens == mode2[1].tokens
    assert mode2[0].audit.lines() == mode2[1].audit.lines()
    guides = (role.engine.guide(), GridGuide(role.engine))
    mode1 = [decode_with_model(lm.model, g, ids, 40)[0] for g in guides]
    assert mode1[0].tokens == mode1[1].tokens
    assert mode1[0].audit.lines() == mode1[1].audit.lines()


def test_guide_work_ahead_of_the_forward_pass_changes_nothing(
    lm: Any, engines: Any, schema: SchemaSnapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``constrained_generate`` hands each step's catch-up and fill to the processor's
    worker, to run during the next forward pass (``GridLogitsProcessor.ahead``). Two
    rows of two roles, one that stops at EOS and one cut by the budget. Fails if a
    fill after the first runs on the caller's thread (nothing overlaps), if the
    budget's last token is followed by a fill no step uses, or if the tokens, stop
    reasons or audit lines differ from the same generation with no work ahead."""
    fills: list[str] = []
    fill = GridLogitsProcessor._fill

    def counted(self: GridLogitsProcessor) -> None:
        fills.append(threading.current_thread().name)
        fill(self)

    monkeypatch.setattr(GridLogitsProcessor, "_fill", counted)
    roles = [engines["analyst"], engines["clerk"]]
    questions = ["How many departments are there?", "List every order with its customer."]
    prompts = [prompt(lm, r, schema, q) for r, q in zip(roles, questions, strict=True)]
    budget = 20

    def run() -> tuple[list[Any], GridLogitsProcessor]:
        fills.clear()
        guides = [r.engine.guide() for r in roles]
        return constrained_generate(lm.model, guides, prompts, budget, stop_on_exit=True)

    ahead, proc = run()
    steps = max(len(o.tokens) for o in ahead)
    assert fills[0] == "MainThread" and len(fills) == steps, fills
    assert all(name.startswith("grid-ahead") for name in fills[1:]), fills
    assert proc.ahead_seconds > 0
    assert {o.stop_reason for o in ahead} == {"eos", "truncated"}, [o.text for o in ahead]
    monkeypatch.setattr(GridLogitsProcessor, "_prefetch", lambda self, ids: None)
    inline, _ = run()
    assert set(fills) == {"MainThread"}
    for a, b in zip(ahead, inline, strict=True):
        assert (a.tokens, a.stop_reason) == (b.tokens, b.stop_reason)
        assert a.audit.lines() == b.audit.lines()


def test_the_kernels_exit_intent_decides_as_the_processors_own(engines: Any) -> None:
    """On CPU float32 logits the processor takes the exit intent and the mask in
    one native call (its ``BitmaskApplier``, the same as ``apply_token_bitmask``
    with ``exit_token``, reading the tensor in place); elsewhere
    ``_exit_intent`` then ``apply_bitmask_``. Random rows of 4-row batches (NaN,
    ties, a top token in a padding column past the vocabulary's words): fails on
    any row whose bitmask or masked logits differ between the two."""
    native = pytest.importorskip("grid_kernels")
    np = pytest.importorskip("numpy")
    engine = engines["analyst"].engine
    eos = engine.vocab.eos_ids[0]
    rng = np.random.default_rng(7)
    exits = kept = 0
    for trial in range(60):
        proc = GridLogitsProcessor([engine.guide() for _ in range(4)], stop_on_exit=True)
        for row in proc._rows:
            row.filled = True
        width = engine.n_words * 32 + (64 if trial % 3 == 0 else 0)
        words = rng.integers(-(2**31), 2**31, size=proc._words.shape, dtype=np.int32)
        logits = rng.standard_normal((4, width), dtype=np.float32)
        logits[0, rng.integers(width)] = np.nan
        logits[1, :2] = logits[1].max() + 1  # a tie: the first maximum counts
        if trial % 3 == 0:
            logits[2, -1] = 100.0  # the top token is a padding column
        proc._words[:] = words
        scores = torch.from_numpy(logits.copy())
        proc._exit_intent(scores)
        apply_bitmask_(scores, torch.from_numpy(proc._words.copy()))
        fused, fused_words = logits.copy(), words.copy()
        native.apply_token_bitmask(fused, fused_words, eos, proc._eos_words)
        assert np.array_equal(fused_words, proc._words), trial
        assert np.array_equal(fused, scores.numpy(), equal_nan=True), trial
        # The processor's own call: its held rows, the tensor read in place.
        decided, proc._words[:] = proc._words.copy(), words
        tensor = torch.from_numpy(logits.copy())
        assert proc._apply_native(tensor), trial
        assert np.array_equal(proc._words, decided), trial
        assert np.array_equal(tensor.numpy(), fused, equal_nan=True), trial
        changed = (fused_words != words).any(axis=1)
        exits, kept = exits + int(changed.sum()), kept + int((~changed).sum())
    assert exits > 20 and kept > 20, (exits, kept)


def test_a_bug_in_the_work_ahead_is_raised_on_the_callers_thread(
    lm: Any, engines: Any, schema: SchemaSnapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's failure (not a row's: those are sticky on the row) reaches
    ``generate``'s caller at the next call. Fails if the call skips the failed
    work as done (``_settle`` reads a done flag before the future)."""
    fill = GridLogitsProcessor._fill

    def broken(self: GridLogitsProcessor) -> None:
        if threading.current_thread().name.startswith("grid-ahead"):
            raise RuntimeError("a bug in the work ahead")
        fill(self)

    monkeypatch.setattr(GridLogitsProcessor, "_fill", broken)
    role = engines["analyst"]
    ids = prompt(lm, role, schema, "How many departments are there?")
    with pytest.raises(RuntimeError, match="a bug in the work ahead"):
        constrained_generate(lm.model, [role.engine.guide()], [ids], 8)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_guide_work_ahead_on_cuda_changes_nothing(
    lm: Any, engines: Any, schema: SchemaSnapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On CUDA the criterion queues the sampled tokens' copy behind an event and the
    worker waits for it (``grid_serve.transformers`` header). Fails if the rows'
    tokens or audit lines differ from the same generation with no work ahead, or if
    no work was done ahead. ``bench/gpu_processor.py`` checks the same at batch 1 to
    128 on a larger model (its result: ``bench/results/gpu_processor.json``)."""
    import copy

    model = copy.deepcopy(lm.model).to("cuda")
    roles = [engines["analyst"], engines["clerk"]]
    questions = ["How many departments are there?", "List every order with its customer."]
    prompts = [prompt(lm, r, schema, q) for r, q in zip(roles, questions, strict=True)]

    def run() -> tuple[list[Any], GridLogitsProcessor]:
        guides = [r.engine.guide() for r in roles]
        return constrained_generate(model, guides, prompts, 20, stop_on_exit=True)

    ahead, proc = run()
    assert proc.ahead_seconds > 0
    monkeypatch.setattr(GridLogitsProcessor, "_prefetch", lambda self, ids: None)
    inline, _ = run()
    for a, b in zip(ahead, inline, strict=True):
        assert (a.tokens, a.stop_reason) == (b.tokens, b.stop_reason)
        assert a.audit.lines() == b.audit.lines()


def test_truncation_is_sealed_as_mode_2(lm: Any, engines: Any, schema: SchemaSnapshot) -> None:
    role = engines["admin"]
    (out,), _ = constrained_generate(
        lm.model, [role.engine.guide()], [prompt(lm, role, schema, "Show every order.")], 3
    )
    assert out.stop_reason == "truncated" and len(out.tokens) == 3 and not out.complete
    assert language(role).is_viable_prefix(out.text)
    seal = out.audit.seal
    assert seal is not None and seal["stop_reason"] == "truncated" and seal["mode"]["mode"] == 2
    assert replay(out.audit.lines(), role.engine).ok


class _StopAfter(StoppingCriteria):  # type: ignore[misc]
    """Ends row 0 once it has ``n`` new tokens (a caller's per-row criterion)."""

    def __init__(self, width: int, n: int) -> None:
        self.width, self.n = width, n

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool)
        done[0] = input_ids.shape[1] - self.width >= self.n
        return done


def test_a_row_a_stopping_criterion_ends_is_sealed_truncated(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """generate pads a row that a stop string or a caller's criterion ends: the
    padding (EOS here) must not reach the guide. It once did: an EOS pad where EOS
    was not legal failed the row (``error``), and where it was, the log recorded an
    ``eos`` step the model never chose."""
    role = engines["analyst"]
    ids = prompt(lm, role, schema, "List the names of all employees.")
    (alone,), _ = constrained_generate(
        lm.model, [role.engine.guide()], [ids], MAX_NEW_TOKENS, stop_on_exit=True
    )
    assert alone.stop_reason == "eos" and b";" in alone.text and b"FROM" in alone.text, alone
    for stop in ("FROM", ";"):
        (out,), _ = constrained_generate(
            lm.model,
            [role.engine.guide()],
            [ids],
            MAX_NEW_TOKENS,
            stop_strings=[stop],
            tokenizer=lm.tokenizer,
            stop_on_exit=True,
        )
        assert out.error is None and out.stop_reason == "truncated", (stop, out)
        assert out.text.endswith(stop.encode()) and alone.text.startswith(out.text)
        records = out.audit.records
        assert len(records) == len(out.tokens) and all(r.kind == "sampled" for r in records)
        assert out.audit.seal is not None and out.audit.seal["stop_reason"] == "truncated"
        assert out.complete == (stop == ";")
        assert replay(out.audit.lines(), role.engine).ok
    width = len(ids)
    (cut, whole), _ = constrained_generate(
        lm.model,
        [role.engine.guide(), role.engine.guide()],
        [ids, ids],
        MAX_NEW_TOKENS,
        stopping_criteria=[_StopAfter(width, 3)],
        stop_on_exit=True,
    )
    assert cut.error is None and cut.stop_reason == "truncated" and len(cut.tokens) == 3
    assert cut.tokens == alone.tokens[:3] and whole.text == alone.text
    assert whole.stop_reason == "eos"
    with pytest.raises(ServingError, match="tokenizer"):
        constrained_generate(lm.model, [role.engine.guide()], [ids], 4, stop_strings=[";"])


class _Interrupt(LogitsProcessor):  # type: ignore[misc]
    """Raises at its call ``at``, as a Ctrl-C or an out-of-memory error in generate would."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt(f"interrupted at call {self.at}")
        return scores


def test_every_row_is_sealed_when_generate_raises(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """generate raising half-way (here at its fifth step) once left every row's log
    unsealed and the worker thread running: the logs end with the last step each
    guide accepted, sealed ``truncated`` for a row a stopping criterion had ended,
    ``error`` for the others, and each replays; generate's own error is raised."""
    role = engines["analyst"]
    ids = prompt(lm, role, schema, "List the names of all employees.")
    with pytest.raises(KeyboardInterrupt, match="call 5") as raised:
        constrained_generate(
            lm.model,
            [role.engine.guide(), role.engine.guide()],
            [ids, ids],
            MAX_NEW_TOKENS,
            processors=[_Interrupt(5)],
            stopping_criteria=[_StopAfter(len(ids), 2)],
        )
    cut, running = raised.value.grid_outcomes
    assert (cut.stop_reason, cut.error, len(cut.tokens)) == ("truncated", None, 2)
    assert running.stop_reason == "error" and "generate raised" in str(running.error)
    assert len(running.tokens) == 4 and not running.complete
    for out in (cut, running):
        seal = out.audit.seal
        assert seal is not None and seal["stop_reason"] == out.stop_reason
        assert len(out.audit.records) == len(out.tokens)
        assert replay(out.audit.lines(), role.engine).ok
    processor = GridLogitsProcessor.for_engine(role.engine, 1)
    processor(torch.tensor([ids]), torch.zeros((1, lm.vocab.n_vocab)))
    (out,) = processor.abort()
    assert out.stop_reason == "error" and isinstance(out.error, ServingError) and not out.complete
    with pytest.raises(ServingError, match="already finished"):
        processor.finish(torch.tensor([ids]))
    # finish given sequences that are not the call's rows raises, its rows sealed first.
    processor = GridLogitsProcessor.for_engine(role.engine, 1)
    processor(torch.tensor([ids]), torch.zeros((1, lm.vocab.n_vocab)))
    with pytest.raises(ServingError, match="consumed tokens changed") as refused:
        processor.finish(torch.tensor([[7, *ids[1:], 0]]))
    (out,) = refused.value.grid_outcomes
    assert out.stop_reason == "error" and "finish failed" in str(out.error)
    assert out.audit.seal is not None and out.audit.seal["stop_reason"] == "error"
    with pytest.raises(ServingError, match="already finished"):
        processor.abort()


def test_a_failed_row_is_sticky_and_the_batch_goes_on(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """A processor after the mask forces a token outside row 0's mask at its second step:
    row 0 fails (and is ended with EOS), row 1 decodes as if alone."""

    role = engines["analyst"]
    ids = prompt(lm, role, schema, "List the names of all employees.")
    saboteur = Saboteur(2, lm.vocab.special_ids)
    (bad, good), processor = constrained_generate(
        lm.model,
        [role.engine.guide(), role.engine.guide()],
        [ids, ids],
        MAX_NEW_TOKENS,
        after=[saboteur],
        stop_on_exit=True,
    )
    assert isinstance(bad.error, GuideError) and bad.error.token == saboteur.forced
    assert bad.stop_reason == "error" and len(bad.tokens) == 1 and not bad.complete
    assert processor.errors[0] is bad.error and processor.errors[1] is None
    assert replay(bad.audit.lines(), role.engine).ok  # the log stops before the bad token
    (alone,), _ = constrained_generate(
        lm.model, [role.engine.guide()], [ids], MAX_NEW_TOKENS, stop_on_exit=True
    )
    assert good.error is None and good.text == alone.text and good.stop_reason == "eos"
    assert_in_role(good.text, role, schema)


def test_processor_warns_that_smollm2_is_not_byte_complete(engines: Any) -> None:
    with pytest.warns(ByteIncompleteWarning, match="never soundness"):
        GridLogitsProcessor([engines["analyst"].engine.guide()])


def test_set_up_mistakes_raise(lm: Any, engines: Any) -> None:
    processor = GridLogitsProcessor.for_engine(engines["analyst"].engine, 2)
    with pytest.raises(ServingError, match="batch of 1 rows for 2 guides"):
        processor(torch.zeros((1, 3), dtype=torch.long), torch.zeros((1, lm.vocab.n_vocab)))
    processor = GridLogitsProcessor.for_engine(engines["analyst"].engine, 1)
    with pytest.raises(ServingError, match="logits of width 10"):
        processor(torch.zeros((1, 3), dtype=torch.long), torch.zeros((1, 10)))


def test_mode1_with_the_model_stops_in_the_language(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    role = engines["clerk"]
    ids = prompt(lm, role, schema, "Which orders were placed by employee 3?")
    gen, model = decode_with_model(
        lm.model, role.engine.guide(), ids, 64, rng=random.Random(0), stop_on_exit=True
    )
    assert gen.stop_reason in ("eos", "reserve", "exit") and gen.tokens[-1] in lm.vocab.eos_ids
    assert_in_role(gen.text, role, schema)
    assert model.calls == gen.sampled + (gen.stop_reason in ("eos", "exit"))
    assert replay(gen.audit.lines(), role.engine).ok


def test_mode1_reserve_completes_under_a_tight_budget(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """Budget too small for the model's own statement: the reserve writes a completion."""
    role = engines["analyst"]
    ids = prompt(lm, role, schema, "List the names and hiring dates of all employees.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ByteIncompleteWarning)
        gen, _ = decode_with_model(lm.model, role.engine.guide(), ids, 30, safety=8)
    assert gen.stop_reason in ("eos", "reserve") and len(gen.tokens) <= 30
    assert_in_role(gen.text, role, schema)
    assert replay(gen.audit.lines(), role.engine).ok


def test_exit_intent_finishes_where_the_model_closes_its_fence(lm: Any, engines: Any) -> None:
    """``ExitIntentLogits.finish``: True only where EOS is not legal and the model's top
    token ends its answer: EOS or a closing fence the mask refuses, or a fence it admits
    (a backtick-quoted alias in SQLite). Then ``decode`` writes the shortest completion.
    Where EOS is legal the fence makes EOS the top choice. Fails if a fence at an open
    statement lets the model write on, or a legal ordinary token, a legal EOS or an
    ordinary refused token finishes."""
    from grid_serve.transformers import ExitIntentLogits, answer_ends

    role = engines["analyst"]
    vocab = lm.vocab
    ends = answer_ends(vocab)
    fence = next(i for i in sorted(ends) if vocab.token_bytes[i] == b"```")
    assert set(vocab.eos_ids) <= ends and fence in ends
    # the role's whole language (generation = "full"): it has backtick-quoted aliases
    full = Engine(role.projection.grammar, vocab, role.lexicon.lexicon, dfa=dialect_dfa(SQLITE))
    guide = full.guide()
    for t in lm.tokenizer.encode("SELECT name FROM", add_special_tokens=False):
        guide.accept_token(t)
    exit_intent = ExitIntentLogits(lambda tokens: torch.zeros(vocab.n_vocab), guide)

    def top(token: int) -> Any:
        row = torch.zeros(lm.model.config.vocab_size)
        row[token] = 10.0
        return row

    space = lm.tokenizer.encode(" employees", add_special_tokens=False)[0]
    refused = lm.tokenizer.encode(" salary", add_special_tokens=False)[0]
    assert not guide.eos_allowed() and guide.validate_tokens([fence]) == 0
    assert exit_intent.finish(top(fence)) and exit_intent.finish(top(vocab.eos_ids[0]))
    assert not exit_intent.finish(top(space))  # admitted: the model writes on
    assert guide.validate_tokens([refused]) == 0 and not exit_intent.finish(top(refused))
    for t in lm.tokenizer.encode(" employees", add_special_tokens=False):
        guide.accept_token(t)
    # A fence the mask admits (a backtick opens a quoted alias in SQLite) still ends it.
    assert not guide.eos_allowed() and guide.validate_tokens([fence]) == 1
    assert exit_intent.finish(top(fence)) and not exit_intent.finish(top(space))
    for t in lm.tokenizer.encode(";", add_special_tokens=False):
        guide.accept_token(t)
    assert guide.eos_allowed() and not exit_intent.finish(top(fence))  # EOS's own stop
    assert exit_intent.finishes == 3
    boosted = exit_intent.__class__(lambda tokens: top(fence), guide)([])
    assert int(boosted.argmax()) in lm.vocab.eos_ids and guide.validate_tokens([fence]) == 0


def test_repetition_penalty_reweighs_only_the_tokens_written() -> None:
    """The CTRL rule on the decode's own tokens: positive logits divided, negative ones
    multiplied, every other logit bit for bit; 1 is off; below 1 is refused."""
    from grid_serve.transformers import RepetitionPenaltyLogits

    base = torch.tensor([2.0, -2.0, 4.0, 0.0, -1.0])
    penalized = RepetitionPenaltyLogits(lambda tokens: base, 2.0)
    out = penalized([0, 1, 1, 3])
    assert out.tolist() == [1.0, -4.0, 4.0, 0.0, -1.0] and base.tolist()[0] == 2.0
    assert penalized([]) is base and RepetitionPenaltyLogits(lambda t: base, 1.0)([0]) is base
    with pytest.raises(ServingError, match="repetition penalty"):
        RepetitionPenaltyLogits(lambda t: base, 0.9)


def test_the_mask_is_the_last_processor_and_stays_hard(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """Processors a caller adds, and transformers' own repetition penalty, run before
    GRID's mask: a processor that flattens every logit (it would erase a mask applied
    before it) cannot take the row out of the role's language; nor can the repetition
    penalty in mode 1. Fails if GRID's processor is not last."""

    class Flatten(LogitsProcessor):  # type: ignore[misc]
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            return torch.zeros_like(scores)

    role = engines["intern"]
    ids = prompt(lm, role, schema, "What is the budget of each department?")
    (out,), _ = constrained_generate(
        lm.model, [role.engine.guide()], [ids], 24, processors=[Flatten()],
        repetition_penalty=1.3,
    )  # fmt: skip
    assert out.error is None and language(role).is_viable_prefix(out.text), out.text
    assert replay(out.audit.lines(), role.engine).ok
    gen, _ = decode_with_model(
        lm.model, role.engine.guide(), ids, 48, stop_on_exit=True, repetition_penalty=1.3
    )
    assert_in_role(gen.text, role, schema)
    assert replay(gen.audit.lines(), role.engine).ok


def random_row(rng: random.Random, width: int, k: int) -> tuple[list[int], Any]:
    """``k`` distinct ids below ``width`` (sorted) and their packed ``array('i')`` row."""
    import array

    ids = sorted(rng.sample(range(width), k))
    row = array.array("i", [0]) * ((width + 31) // 32)
    for i in ids:
        bit = 1 << (i & 31) if (i & 31) != 31 else -(1 << 31)  # int32: bit 31 is the sign
        row[i >> 5] |= bit
    return ids, row


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_masked_argmax_is_greedy_sampling(dtype: str) -> None:
    """The greedy choice under a packed row (float32: the kernels; float64: torch)
    equals ``Sampling.choose`` at temperature 0 over the row's ids (ties to the
    lowest id; NaN and -inf ignored; None when no admitted logit is finite). 200
    random cases."""
    from grid_core.decode import GREEDY
    from grid_serve.transformers import masked_argmax

    rng = random.Random(3)
    for case in range(200):
        width = rng.choice([31, 32, 100, 1000])
        ids, row = random_row(rng, width, rng.randint(1, min(width, 20)))
        values = [float(rng.choice([0, 1, 2, 3])) for _ in range(width)]
        if case % 7 == 0:
            values[ids[0]] = float("nan")
        if case % 11 == 0:
            for i in ids:
                values[i] = float("-inf")
        got = masked_argmax(torch.tensor(values, dtype=getattr(torch, dtype)), row)
        finite = [i for i in ids if math.isfinite(values[i])]
        if not finite:
            assert got is None, case
        else:
            assert got == GREEDY.choose(ids, [values[i] for i in ids], rng), case


def test_masked_argmax_is_the_same_on_both_paths() -> None:
    """The kernels' choice (contiguous CPU float32) and the torch path's (the same
    values as float64, and as a strided float32 row) agree on 500 random rows with ties,
    NaN, -inf and +inf (an admitted +inf is the best, not finite: None), rows
    wider and narrower than their masks, and empty masks. Skipped without the
    kernels (there is one path then)."""
    pytest.importorskip("grid_kernels._native")
    from grid_serve.transformers import masked_argmax

    rng = random.Random(11)
    specials = [float("nan"), float("inf"), float("-inf")]
    for case in range(500):
        width = rng.choice([1, 31, 32, 33, 64, 100, 1000])
        ids, row = random_row(rng, width + rng.choice([0, 0, 40]), rng.randint(0, min(width, 30)))
        values = [float(rng.choice([0, 1, 2, 3])) for _ in range(width)]
        for _ in range(rng.choice([0, 0, 1, 3])):
            values[rng.randrange(width)] = rng.choice(specials)
        native = masked_argmax(torch.tensor(values), row)
        wide = masked_argmax(torch.tensor(values, dtype=torch.float64), row)
        strided = masked_argmax(torch.tensor([[v, 0.0] for v in values])[:, 0], row)
        assert native == wide == strided, (case, ids, values)


@pytest.mark.parametrize("bad", [math.inf, math.nan, 50.0])
@pytest.mark.parametrize("two_d", [False, True], ids=["V", "1xV"])
def test_exit_intent_takes_eos_whatever_else_the_row_holds(
    lm: Any, engines: Any, bad: float, two_d: bool
) -> None:
    """Where EOS is legal and the model's top token is refused, EOS becomes the top
    choice: also when that top logit is +inf or NaN (``max() + 1e4`` was inf or NaN,
    which the samplers read as -inf) and for logits shaped (1, V) (an IndexError)."""
    from grid_serve.transformers import ExitIntentLogits

    guide = engines["analyst"].engine.guide()
    for t in lm.tokenizer.encode("SELECT name FROM employees;", add_special_tokens=False):
        guide.accept_token(t)
    assert guide.eos_allowed()
    refused = lm.tokenizer.encode(" salary", add_special_tokens=False)[0]
    space = lm.tokenizer.encode(" ", add_special_tokens=False)[0]
    assert guide.validate_tokens([refused]) == 0 and guide.validate_tokens([space]) == 1
    row = torch.zeros(lm.model.config.vocab_size)
    row[refused], row[space] = bad, 5.0
    logits = row.unsqueeze(0) if two_d else row
    out = ExitIntentLogits(lambda tokens: logits, guide)([])
    assert out.shape == logits.shape
    flat = out.reshape(-1)
    eos = guide.engine.vocab.eos_ids[0]
    assert torch.isfinite(flat[eos]) and int(flat.argmax()) == eos
    assert flat[eos] - flat[space] >= 1e4


def test_mode_2_rows_start_from_fresh_guides(engines: Any) -> None:
    guide = engines["analyst"].engine.guide()
    guide.accept_token(guide.mask_ids()[0])
    with pytest.raises(ServingError, match="every row starts from a fresh guide"):
        GridLogitsProcessor([guide])


def test_mode_2_rows_have_guides_of_their_own(engines: Any) -> None:
    """One guide for two rows: natively a borrow error took the whole batch down, in
    Python the second row read the first's state and both rows sealed one log."""
    guide = engines["analyst"].engine.guide()
    with pytest.raises(ServingError, match="one guide is given twice"):
        GridLogitsProcessor([guide, guide])


def test_constrained_generate_takes_a_dict_output(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """``return_dict_in_generate=True``: generate returns a ModelOutput, whose
    ``sequences`` the processor catches up with; the outcome is the plain call's."""
    role = engines["admin"]
    ids = prompt(lm, role, schema, "Show every order.")
    runs = [
        constrained_generate(lm.model, [role.engine.guide()], [ids], 3, **extra)[0][0]
        for extra in ({}, {"return_dict_in_generate": True})
    ]
    plain, as_dict = runs
    assert as_dict.tokens == plain.tokens and as_dict.stop_reason == plain.stop_reason
    assert as_dict.audit.lines() == plain.audit.lines()


@pytest.mark.parametrize("arg", ["eos_token_id", "pad_token_id", "attention_mask"])
def test_constrained_generate_names_the_arguments_it_sets(lm: Any, engines: Any, arg: str) -> None:
    """Passing one of them was a raw TypeError ("multiple values for keyword argument")."""
    guide = engines["analyst"].engine.guide()
    with pytest.raises(ServingError, match=f"constrained_generate sets {arg} itself"):
        constrained_generate(lm.model, [guide], [[1, 2]], 8, **{arg: 0})


@pytest.mark.parametrize("do_sample", [False, True], ids=["greedy", "sampled"])
def test_a_processor_against_the_mask_leaves_no_row_without_a_choice(
    lm: Any, engines: Any, schema: SchemaSnapshot, do_sample: bool
) -> None:
    """transformers' own processors can put -inf on every id GRID admits: ``min_new_tokens``
    blocks EOS while a failed row's mask admits EOS only, ``forced_eos_token_id`` blocks
    every id but EOS on the last step while the statement is incomplete. Such a row is
    uniform over its mask: sampling raised for the whole batch, and greedy took id 0, a
    token outside the mask, as the last token of a row that then read as healthy."""

    role = engines["analyst"]
    ids = prompt(lm, role, schema, "List the names of all employees.")
    torch.manual_seed(0)
    (bad, good), _ = constrained_generate(
        lm.model,
        [role.engine.guide(), role.engine.guide()],
        [ids, ids],
        12,
        after=[Saboteur(1, lm.vocab.special_ids)],  # row 0's first token: sticky failure
        min_new_tokens=6,
        do_sample=do_sample,
    )
    assert bad.stop_reason == "error" and good.error is None
    assert language(role).is_viable_prefix(good.text), good.text
    assert replay(good.audit.lines(), role.engine).ok
    (out,), _ = constrained_generate(
        lm.model, [role.engine.guide()], [ids], 5, forced_eos_token_id=lm.vocab.eos_ids[0],
        do_sample=do_sample,
    )  # fmt: skip
    assert out.error is None and out.stop_reason == "truncated" and len(out.tokens) == 5
    assert language(role).is_viable_prefix(out.text), out.text
    assert replay(out.audit.lines(), role.engine).ok


def test_rows_reordered_or_replaced_between_calls_are_refused(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """Beam search reorders rows, a second generate call replaces them: each would feed
    one row's token to another row's guide. The processor checks every consumed column
    of every row (the prompt's too) and refuses before it accepts a token of the call;
    a check of each row's last column only let rows whose last tokens are equal swap."""
    engine = engines["analyst"].engine
    width = lm.vocab.n_vocab

    def fresh(ids: list[list[int]] | None = None) -> tuple[GridLogitsProcessor, list[int]]:
        processor = GridLogitsProcessor.for_engine(engine, 2)
        processor(torch.tensor(ids or [[1, 2], [3, 4]]), torch.zeros((2, width)))
        first = [processor.guides[i].mask_ids()[i] for i in range(2)]  # two different tokens
        return processor, first

    changed = "row {}'s consumed tokens changed"
    processor, (a, b) = fresh()
    processor(torch.tensor([[1, 2, a], [3, 4, b]]), torch.zeros((2, width)))  # in order: fine
    assert [g.steps for g in processor.guides] == [1, 1]
    with pytest.raises(ServingError, match=changed.format(0)):  # beams swapped
        processor(torch.tensor([[3, 4, b, a], [1, 2, a, a]]), torch.zeros((2, width)))
    assert [g.steps for g in processor.guides] == [1, 1]  # nothing accepted
    processor, (a, b) = fresh()
    with pytest.raises(ServingError, match=changed.format(1)):  # a new call
        processor(torch.tensor([[1, 2, a, 2], [5, 6, 7, 8]]), torch.zeros((2, width)))
    with pytest.raises(ServingError, match="input_ids of width 1 after width 2"):
        processor(torch.tensor([[2], [4]]), torch.zeros((2, width)))
    processor, (a, b) = fresh()  # a new call as wide as the last: the width is no tell
    with pytest.raises(ServingError, match=changed.format(0)):
        processor(torch.tensor([[9, 9], [3, 4]]), torch.zeros((2, width)))
    processor, (a, b) = fresh([[1, 7], [3, 7]])  # rows whose last tokens are equal, swapped
    with pytest.raises(ServingError, match=changed.format(0)):
        processor(torch.tensor([[3, 7], [1, 7]]), torch.zeros((2, width)))
    processor, (a, b) = fresh()
    processor(torch.tensor([[1, 2, a], [3, 4, a]]), torch.zeros((2, width)))
    with pytest.raises(ServingError, match=changed.format(0)):  # equal last tokens, swapped
        processor(torch.tensor([[3, 4, a, b], [1, 2, a, b]]), torch.zeros((2, width)))
    # The work done ahead of the forward pass checks the same, before it hands work on.
    processor, (a, b) = fresh()
    with pytest.raises(ServingError, match=changed.format(0)):
        processor._prefetch(torch.tensor([[3, 4, b], [1, 2, a]]))
    assert [g.steps for g in processor.guides] == [0, 0]
    # Beam search with one guide per beam row (the batch size matches): refused.
    ids = prompt(lm, engines["analyst"], schema, "List the names of all employees.")
    processor = GridLogitsProcessor.for_engine(engine, 2, budget=8)
    attention = torch.ones((1, len(ids)), dtype=torch.long)
    with pytest.raises(ServingError, match="rows were reordered"), torch.inference_mode():
        lm.model.generate(
            input_ids=torch.tensor([ids]), attention_mask=attention, max_new_tokens=8,
            num_beams=2, logits_processor=[processor], do_sample=False,
            eos_token_id=list(lm.vocab.eos_ids), pad_token_id=lm.vocab.eos_ids[0],
        )  # fmt: skip


def test_event_streamer_outlives_a_failed_row_and_serves_the_next_call(
    lm: Any, engines: Any, schema: SchemaSnapshot
) -> None:
    """A row that fails is ended with EOS where its output is no sentence: the streamer
    raised an AssertionError inside ``generate`` (which then never ended the stream, and
    the consumer waited forever). Now its events stop, the error is kept, the stream
    ends; and the same streamer serves the next ``generate`` call from its prompt."""
    from grid_core.events import tracker
    from grid_serve.text2sql import DIALECT
    from grid_serve.transformers import EventStreamer
    from grid_sql.dialects import get_dialect
    from grid_sql.events import event_spec

    role = engines["analyst"]
    spec = event_spec(get_dialect(DIALECT), role.engine.grammar)
    streamer = EventStreamer(role.engine, spec, timeout=60)
    ids = prompt(lm, role, schema, "List the names of all employees.")
    (bad,), _ = constrained_generate(
        lm.model,
        [role.engine.guide()],
        [ids],
        12,
        after=[Saboteur(2, lm.vocab.special_ids)],
        streamer=streamer,
    )
    assert bad.stop_reason == "error"
    items = list(streamer)  # ends: generate ended the stream
    assert streamer.error is not None  # the forced EOS where no sentence is: events stop
    # The text is what generate sampled, the refused token included (RowOutcome's stops before).
    assert "".join(x for kind, x in items if kind == "text").encode().startswith(bad.text)
    (good,), _ = constrained_generate(
        lm.model, [role.engine.guide()], [ids], MAX_NEW_TOKENS, stop_on_exit=True,
        streamer=streamer,
    )  # fmt: skip
    again = list(streamer)
    assert good.error is None
    assert "".join(x for kind, x in again if kind == "text").encode() == good.text
    events = [x.key for kind, x in again if kind == "event"]
    assert events == [e.key for e in tracker(role.engine, spec).parse(good.text)]


def test_event_streamer_keeps_the_error_of_eos_before_a_sentence(engines: Any) -> None:
    """A row ended with EOS while its output is a viable prefix but no sentence (a
    failed row after a token that still scans): the tracker once finished the stream
    quietly and ``streamer.error`` stayed None (found by a review, session 45)."""
    from grid_serve.text2sql import DIALECT
    from grid_serve.transformers import EventStreamer
    from grid_sql.dialects import get_dialect
    from grid_sql.events import event_spec

    role = engines["analyst"]
    vocab = role.engine.vocab
    byte = {x: i for i, x in enumerate(vocab.token_bytes) if len(x) == 1}
    streamer = EventStreamer(
        role.engine, event_spec(get_dialect(DIALECT), role.engine.grammar), timeout=5
    )
    streamer.put(torch.tensor([[1, 2]]))  # the prompt
    for b in b"SELECT name FROM":
        streamer.put(torch.tensor([byte[bytes([b])]]))
    streamer.put(torch.tensor([vocab.eos_ids[0]]))
    streamer.end()
    items = list(streamer)
    assert isinstance(streamer.error, GuideError), streamer.error
    assert "".join(x for kind, x in items if kind == "text") == "SELECT name FROM"
    assert not [x for kind, x in items if kind == "event" and x.kind == "statement"]


def test_event_streamer_drops_what_a_consumer_that_gave_up_left_unread(engines: Any) -> None:
    """A consumer that stops at its timeout leaves its call's items in the queue: the next
    call's consumer read them (and stopped at that call's end). They are dropped at the
    next call's prompt."""
    from grid_serve.text2sql import DIALECT
    from grid_serve.transformers import EventStreamer
    from grid_sql.dialects import get_dialect
    from grid_sql.events import event_spec

    role = engines["analyst"]
    vocab = role.engine.vocab
    byte = {x: i for i, x in enumerate(vocab.token_bytes) if len(x) == 1}
    streamer = EventStreamer(
        role.engine, event_spec(get_dialect(DIALECT), role.engine.grammar), timeout=0.05
    )

    def call(text: bytes) -> None:
        streamer.put(torch.tensor([[1, 2]]))  # the prompt
        for b in text:
            streamer.put(torch.tensor([byte[bytes([b])]]))
        streamer.end()

    def texts(items: Any) -> str:
        return "".join(x for kind, x in items if kind == "text")

    with pytest.raises(queue.Empty):  # consumer 1 gives up before its call begins
        next(iter(streamer))
    call(b"SE")  # unread
    call(b"SELECT")
    assert texts(streamer) == "SELECT"
    # A consumer that is only slow loses nothing when the next call begins.
    call(b"SELECT 1")
    slow = iter(streamer)
    assert next(slow) == ("text", "S")
    call(b"SELECT 2")
    assert texts(slow) == "ELECT 1" and texts(streamer) == "SELECT 2"
    # A consumer that gives up in the middle of a call: the rest of that call goes.
    streamer.put(torch.tensor([[1, 2]]))
    streamer.put(torch.tensor([byte[b"S"]]))
    gives_up = iter(streamer)
    assert next(gives_up) == ("text", "S")
    with pytest.raises(queue.Empty):
        next(gives_up)
    for b in b"ELECT 3":
        streamer.put(torch.tensor([byte[bytes([b])]]))
    streamer.end()
    call(b"SELECT 4")
    assert texts(streamer) == "SELECT 4"
