(** * Prefix: where the operational Prefix(L) can miss a semantic prefix.

    Reference: DESIGN.md section 3 (lexing, L, the operational Prefix(L)).
    The code modelled is packages/grid-core/src/grid_core/lexer.py:
    [Scanner.step] (the union automaton and the last accepted prefix),
    [Lexer._emit] (the longest accepted prefix, picked under the stack's
    allowed set), [Lexer.advance] (one byte at a time: the loop's state
    between two bytes is a configuration), [Lexer.finalize] and
    [Lexer.eos_allowed] (the EOS gate), [Scanner.live] and
    [Lexer.is_viable] (liveness of the remainder).

    Model.  A configuration is a stack [st] (any type) and the remainder
    [r], the bytes of the lexeme in progress.  [alive r]: the union automaton
    has not died on [r]; [acc x]: [x] is accepted by the automaton (some
    terminal's pattern matches it); [cand x t]: [t] is a candidate of the
    lexeme [x] (for a lexicon category, only if [x] is one of its words);
    [pick_ok st x]: the pick of [x] under the allowed set of [st] exists
    ([Scanner.pick] is not -1), which yields a candidate that is allowed or
    ignored ([pick_sound]).  [lap r] is the longest non-empty accepted prefix
    of [r] (the scan state's [la_len]), defined here from [acc].  [advance]
    and [final_ok] are the code's, constrained by three hypotheses that
    restate what lexer.py does:
    - [advance_alive]: a byte that keeps the automaton alive is appended to
      the remainder, and nothing is emitted;
    - [advance_dead]: a byte that kills the automaton leaves the language
      unless the longest accepted prefix of the remainder has a pick
      ([Lexer._emit]);
    - [final_emits]: at the end of input a non-empty remainder is emitted
      the same way ([Lexer.finalize]) before [$END] is tried.
    L is the set of byte strings the lexer reads to a configuration where
    EOS is legal (DESIGN.md section 3's L: lex and parse to ACCEPT);
    [prefix_sem] is Lang's semantic Prefix of it; [prefix_op] is the
    engine's: the scan succeeds and the remainder is empty or [live]: a
    prefix of a lexeme of a terminal that is allowed or ignored.

    Statements:
    - [continuation_cases]: if some continuation from a configuration with a
      non-empty remainder reaches EOS, the remainder is live or
      *dead-but-emittable*: its longest accepted prefix has a pick.
    - [prefix_sem_cases]: every semantic prefix scans, and its remainder is
      empty, live, or dead-but-emittable.
    - [prefix_gap_dead_emittable]: so a semantic prefix that is not
      operationally viable ends in a non-empty remainder that is not live and
      whose longest accepted prefix has a pick: Prefix(L) \ Prefix_op(L)
      consists of dead-but-emittable configurations only.
    - [prefix_op_complete]: where no reachable configuration is dead but
      emittable, Prefix(L) is contained in Prefix_op(L).
    - [prefix_op_sound_iff]: Prefix_op(L) is contained in Prefix(L) exactly
      when every operationally viable configuration has a continuation that
      reaches EOS.  That is the correct-prefix property of the LALR(1) tables
      on a reduced grammar together with writable lexemes; it is not proved
      here (the parser and the automaton are not modelled), and is checked
      by packages/grid-sql/tests/test_prefix_gap.py.  The postgres dialect
      has dead-but-emittable configurations (proofs/README.md, "The
      Prefix(L) gap"), so the hypothesis of [prefix_op_complete] fails
      there. *)

From Coq Require Import List Bool.
Import ListNotations.
From GRID Require Import Lang.

Section Munch.
  Context {B T St : Type}.
  Variable alive : list B -> bool.
  Variable acc : list B -> bool.
  Variable cand : list B -> T -> Prop.
  Variable allowed : St -> T -> Prop.
  Variable ignored : T -> Prop.
  Variable pick_ok : St -> list B -> bool.
  Hypothesis pick_sound : forall st x,
    pick_ok st x = true -> exists t, cand x t /\ (allowed st t \/ ignored t).

  (** The longest non-empty accepted prefix, read from the end. *)
  Fixpoint lap_rev (rr : list B) : option (list B) :=
    match rr with
    | [] => None
    | _ :: rr' => if acc (rev rr) then Some (rev rr) else lap_rev rr'
    end.
  Definition lap (r : list B) : option (list B) := lap_rev (rev r).

  Lemma lap_snoc : forall r b,
    lap (r ++ [b]) = if acc (r ++ [b]) then Some (r ++ [b]) else lap r.
  Proof.
    intros r b. unfold lap. rewrite rev_app_distr. simpl. now rewrite rev_involutive.
  Qed.

  Definition config : Type := (St * list B)%type.
  Variable advance : config -> B -> option config.
  Variable final_ok : config -> bool.
  Variable init : config.

  Definition emittable (st : St) (r : list B) : Prop :=
    exists x, lap r = Some x /\ pick_ok st x = true.

  Hypothesis advance_alive : forall st r b,
    alive (r ++ [b]) = true -> advance (st, r) b = Some (st, r ++ [b]).
  Hypothesis advance_dead : forall st r b c,
    alive (r ++ [b]) = false -> advance (st, r) b = Some c -> emittable st r.
  Hypothesis final_emits : forall st r,
    r <> [] -> final_ok (st, r) = true -> emittable st r.

  (** The remainder is a prefix of a lexeme of an allowed or ignored
      terminal ([Scanner.live]). *)
  Definition live (st : St) (r : list B) : Prop :=
    exists u t, cand (r ++ u) t /\ (allowed st t \/ ignored t).

  Fixpoint run (c : config) (bs : list B) : option config :=
    match bs with
    | [] => Some c
    | b :: bs' =>
        match advance c b with
        | Some c' => run c' bs'
        | None => None
        end
    end.

  Lemma run_app : forall u c v,
    run c (u ++ v) = match run c u with Some c' => run c' v | None => None end.
  Proof.
    induction u as [| b u IH]; intros c v; simpl; [reflexivity |].
    destruct (advance c b); [apply IH | reflexivity].
  Qed.

  Definition reaches_eos (c : config) (s : list B) : Prop :=
    exists c', run c s = Some c' /\ final_ok c' = true.

  Definition L : lang B := fun w => reaches_eos init w.

  Definition prefix_sem : lang B := Prefix L.

  Definition prefix_op (w : list B) : Prop :=
    exists st r, run init w = Some (st, r) /\ (r = [] \/ live st r).

  Theorem continuation_cases : forall s st r,
    r <> [] -> reaches_eos (st, r) s -> live st r \/ emittable st r.
  Proof.
    induction s as [| b s IH]; intros st r Hr [c' [Hrun Hfin]].
    - simpl in Hrun. injection Hrun as <-. right. exact (final_emits st r Hr Hfin).
    - simpl in Hrun. destruct (alive (r ++ [b])) eqn:Ea.
      + rewrite (advance_alive st r b Ea) in Hrun.
        assert (Hr' : r ++ [b] <> []) by (destruct r; discriminate).
        destruct (IH st (r ++ [b]) Hr' (ex_intro _ c' (conj Hrun Hfin)))
          as [[u [t [Hc Ht]]] | [x [Hlap Hpick]]].
        * left. exists (b :: u), t. rewrite <- app_assoc in Hc. auto.
        * rewrite lap_snoc in Hlap. destruct (acc (r ++ [b])).
          -- injection Hlap as <-. destruct (pick_sound st _ Hpick) as [t [Hc Ht]].
             left. exists [b], t. auto.
          -- right. exists x. auto.
      + destruct (advance (st, r) b) as [c1 |] eqn:Ead; [| discriminate].
        right. exact (advance_dead st r b c1 Ea Ead).
  Qed.

  (** Every semantic prefix scans to a configuration whose remainder is empty,
      live, or dead-but-emittable. *)
  Theorem prefix_sem_cases : forall w, prefix_sem w ->
    exists st r, run init w = Some (st, r) /\ (r = [] \/ live st r \/ emittable st r).
  Proof.
    intros w [s [c' [Hrun Hfin]]]. rewrite run_app in Hrun.
    destruct (run init w) as [[st r] |] eqn:Ew; [| discriminate].
    exists st, r. split; [reflexivity |].
    destruct r as [| b r']; [left; reflexivity | right].
    assert (Hne : b :: r' <> []) by discriminate.
    exact (continuation_cases s st (b :: r') Hne (ex_intro _ c' (conj Hrun Hfin))).
  Qed.

  (** The gap, exactly located: a semantic prefix that the engine does not
      find viable ends in a non-empty remainder that is not live but whose
      longest accepted prefix has a pick. *)
  Theorem prefix_gap_dead_emittable : forall w,
    prefix_sem w -> ~ prefix_op w ->
    exists st r, run init w = Some (st, r) /\ r <> [] /\ ~ live st r /\ emittable st r.
  Proof.
    intros w Hsem Hop. destruct (prefix_sem_cases w Hsem) as [st [r [Hrun Hcases]]].
    exists st, r. split; [exact Hrun |].
    assert (Hnl : ~ (r = [] \/ live st r)) by (intros H; apply Hop; exists st, r; auto).
    repeat split.
    - intros H. apply Hnl. now left.
    - intros H. apply Hnl. now right.
    - destruct Hcases as [H | [H | H]]; [exfalso; apply Hnl; now left |
        exfalso; apply Hnl; now right | exact H].
  Qed.

  (** With no reachable dead-but-emittable configuration, every semantic
      prefix is operationally viable. *)
  Theorem prefix_op_complete :
    (forall w st r, run init w = Some (st, r) -> r <> [] -> emittable st r -> live st r) ->
    forall w, prefix_sem w -> prefix_op w.
  Proof.
    intros Hno w Hsem. destruct (prefix_sem_cases w Hsem) as [st [r [Hrun Hcases]]].
    exists st, r. split; [exact Hrun |].
    destruct r as [| b r']; [now left | right].
    destruct Hcases as [H | [H | H]]; [discriminate | exact H |].
    exact (Hno w st (b :: r') Hrun ltac:(discriminate) H).
  Qed.

  (** The other inclusion is exactly "every operationally viable
      configuration reaches EOS by some continuation": the correct-prefix
      property of the tables on a reduced grammar with writable lexemes,
      which this model does not derive. *)
  Theorem prefix_op_sound_iff :
    (forall w, prefix_op w -> prefix_sem w) <->
    (forall w st r, run init w = Some (st, r) -> (r = [] \/ live st r) ->
       exists s, reaches_eos (st, r) s).
  Proof.
    split.
    - intros H w st r Hrun Hv. destruct (H w (ex_intro _ st (ex_intro _ r (conj Hrun Hv))))
        as [s [c' [Hrun' Hfin]]].
      rewrite run_app, Hrun in Hrun'. exists s, c'. auto.
    - intros H w [st [r [Hrun Hv]]]. destruct (H w st r Hrun Hv) as [s [c' [Hrun' Hfin]]].
      exists s, c'. split; [| exact Hfin]. now rewrite run_app, Hrun.
  Qed.
End Munch.
