(** * Reserve: the mode-1 decode loop, as written, stops in L within budget (theorem 4).

    Reference: DESIGN.md section 7 (termination, mode 1) and section 8
    step 3 (the reserve trigger).  The code modelled is
    [packages/grid-core/src/grid_core/decode.py]: [_Loop.__init__] (the
    start check), [_Loop.run] (one iteration per sampled or forced token),
    [_Loop.write_completion] and [_Loop.take]; and
    [packages/grid-core/src/grid_core/reserve.py]: [ReserveTable.reserve]
    and [ReserveTable.completion].

    Model, one name per object of the code:
    - [step c t] is [Lexer.advance(config, token_bytes[t])]: [None] when
      the token leaves the language;
    - [admits c t] is the mask bit of a non-EOS token at [c]
      ([StepMask.admits], the guide's [fill_next_token_bitmask]), and also
      what [guide.accept_token] accepts for such a token ([GridGuide] checks
      [advance] and [is_viable], which the differential tests tie to the
      mask bit);
    - [eos_ok c] is [Lexer.eos_allowed] (the EOS bit of the mask, and what
      [accept_token] checks for an EOS id);
    - [reserve c] is [ReserveTable.reserve], [completion c] is
      [ReserveTable.completion] (token ids, EOS not included), [safety] is
      the loop's [safety];
    - [choose h c] is the loop's choice at a step with history [h] and
      configuration [c]: the single id of a forced span, or what the sampler
      ([generate]'s [sampler], [decode]'s logits and [pick]) returns.  It is
      any function: a run of a stateful or random sampler is the run of the
      function that makes the same choices along that history.  EOS ids are
      one choice [Eos].
    - [left] is the code's [left = budget - len(tokens) - 1], the tokens
      that may still come before EOS.

    [run left h c] is [_Loop.run] from the step where [h] is taken and the
    configuration is [c], in the code's order: (1) the invariant
    [assert self.reserve <= left]; (2) the trigger [left <= R(c) + safety]
    writes the completion; (3) the choice; a choice outside the mask is a
    [GuideError]; EOS stops; (4) [nxt = advance(c, t)], asserted defined;
    (5) the early trigger: when [R(nxt) > left - 1] the token is NOT taken
    and the completion of [c] is written instead; (6) otherwise the token is
    taken and the loop goes on with [left - 1].  [finish] is
    [write_completion]: each token of [completion c] goes through
    [accept_token] (a masked one raises [MaskError]), then EOS ([accept_token]
    refuses it unless [eos_ok]), and [assert len(self.tokens) <= budget].
    Every failing check of the code is the outcome [Fail]; a stop is
    [Stop how ts c]: the stop reason, the non-EOS tokens taken, and the
    configuration at which EOS was accepted.  The start is
    [decode budget c0]: [_Loop.__init__] refuses [R(c0) + 1 > budget].

    Statements:
    - [decode_stop_sound] (no hypothesis at all): every stop of the loop, for
      every sampler, reserve and completion, is a run of masked tokens ending
      where EOS is legal, with the tokens and EOS within the budget.  The
      loop's own runtime checks make every non-error stop a sentence.
    - [termination_as_written]: if the written completion of every
      reachable configuration is legal token by token, ends where EOS is
      legal and is no longer than the reserve, masked tokens advance, and the
      sampler picks inside the mask, then from any configuration whose
      reserve fits the budget the loop stops (never [Fail]) with EOS at a
      sentence, within the budget, for every sampler.  There is no premise on
      how much one token may raise the reserve: the early trigger takes its
      place.
    - [termination_with_reserve]: under the same hypotheses, if moreover one
      admitted token raises the reserve by at most [safety], the early
      trigger never fires (the trigger alone keeps the invariant), as
      decode.py's header says.
    - [early_trigger_needed]: the early trigger is load-bearing.  With
      [safety] 0 and a reserve that rises by one on an opening token, a
      sampler that opens makes the loop stop through the early trigger; taking
      the token would have left a configuration whose reserve exceeds the
      tokens left (where the loop without it would wedge). *)

From Coq Require Import List Arith Lia Bool.
Import ListNotations.
From GRID Require Import Lang.

(** How a decode stopped: a sampled or forced EOS ([stop_reason] "eos"), the
    trigger ("reserve"), or the early trigger ("reserve", counted in
    [Generation.early_triggers]). *)
Inductive how_stop : Type := by_eos | by_reserve | by_early.

Section Loop.
  Context {Config Tok : Type}.
  Variable step : Config -> Tok -> option Config.
  Variable admits : Config -> Tok -> bool.
  Variable eos_ok : Config -> bool.
  Variable reserve : Config -> nat.
  Variable completion : Config -> list Tok.
  Variable safety : nat.
  Variable choose : list Tok -> Config -> choice Tok.

  Inductive outcome : Type :=
  | Stop (how : how_stop) (ts : list Tok) (c : Config)
  | Fail.

  (** [accept_token] on each token of a list, from [c]: the configuration
      after the last one, or [None] at the first refused token. *)
  Fixpoint write (c : Config) (ts : list Tok) : option Config :=
    match ts with
    | [] => Some c
    | t :: ts' =>
        if admits c t then
          match step c t with
          | Some c' => write c' ts'
          | None => None
          end
        else None
    end.

  (** [_Loop.write_completion] with [left] tokens left before EOS. *)
  Definition finish (how : how_stop) (left : nat) (h : list Tok) (c : Config) : outcome :=
    match write c (completion c) with
    | Some c' =>
        if eos_ok c' && (length (completion c) <=? left)
        then Stop how (h ++ completion c) c'
        else Fail
    | None => Fail
    end.

  (** [_Loop.run]. *)
  Fixpoint run (left : nat) (h : list Tok) (c : Config) : outcome :=
    if negb (reserve c <=? left) then Fail
    else if left <=? reserve c + safety then finish by_reserve left h c
    else
      match left with
      | 0 => Fail
      | S l =>
          match choose h c with
          | Eos => if eos_ok c then Stop by_eos h c else Fail
          | Emit t =>
              if admits c t then
                match step c t with
                | None => Fail
                | Some c' =>
                    if l <? reserve c' then finish by_early left h c
                    else run l (h ++ [t]) c'
                end
              else Fail
          end
      end.

  (** [_Loop.__init__] then [_Loop.run]. *)
  Definition decode (budget : nat) (c0 : Config) : outcome :=
    if budget <? reserve c0 + 1 then Fail else run (budget - 1) [] c0.

  (** Tokens [ts] lead from [c] to [c'], each admitted by the mask. *)
  Inductive masked_run : Config -> list Tok -> Config -> Prop :=
  | run_nil c : masked_run c [] c
  | run_cons c t c1 ts c' :
      admits c t = true -> step c t = Some c1 -> masked_run c1 ts c' ->
      masked_run c (t :: ts) c'.

  Lemma masked_run_app : forall c ts1 c1 ts2 c2,
    masked_run c ts1 c1 -> masked_run c1 ts2 c2 -> masked_run c (ts1 ++ ts2) c2.
  Proof.
    intros c ts1 c1 ts2 c2 H1 H2. induction H1; simpl; auto.
    econstructor; eauto.
  Qed.

  Lemma write_masked_run : forall ts c c',
    write c ts = Some c' -> masked_run c ts c'.
  Proof.
    induction ts as [| t ts IH]; intros c c' H; simpl in H.
    - injection H as <-. constructor.
    - destruct (admits c t) eqn:Ea; [| discriminate].
      destruct (step c t) as [c1 |] eqn:Es; [| discriminate].
      econstructor; eauto.
  Qed.

  Lemma finish_sound : forall how left h c how' ts c',
    finish how left h c = Stop how' ts c' ->
    exists ws, ts = h ++ ws /\ masked_run c ws c' /\ eos_ok c' = true /\
      length ws <= left /\ how' = how.
  Proof.
    intros how left h c how' ts c' H. unfold finish in H.
    destruct (write c (completion c)) as [c1 |] eqn:Ew; [| discriminate].
    destruct (eos_ok c1 && (length (completion c) <=? left)) eqn:Eb; [| discriminate].
    apply andb_true_iff in Eb as [He Hl]. apply Nat.leb_le in Hl.
    injection H as <- <- <-. exists (completion c).
    repeat split; auto. now apply write_masked_run.
  Qed.

  Lemma run_eq : forall left h c, run left h c =
    if negb (reserve c <=? left) then Fail
    else if left <=? reserve c + safety then finish by_reserve left h c
    else
      match left with
      | 0 => Fail
      | S l =>
          match choose h c with
          | Eos => if eos_ok c then Stop by_eos h c else Fail
          | Emit t =>
              if admits c t then
                match step c t with
                | None => Fail
                | Some c' =>
                    if l <? reserve c' then finish by_early left h c
                    else run l (h ++ [t]) c'
                end
              else Fail
          end
      end.
  Proof. intros [| l] h c; reflexivity. Qed.

  Lemma run_sound : forall left h c how ts c',
    run left h c = Stop how ts c' ->
    exists ws, ts = h ++ ws /\ masked_run c ws c' /\ eos_ok c' = true /\ length ws <= left.
  Proof.
    induction left as [| l IH]; intros h c how ts c' H; rewrite run_eq in H;
      destruct (negb (reserve c <=? _)); try discriminate;
      destruct (_ <=? reserve c + safety);
      try (destruct (finish_sound _ _ _ _ _ _ _ H) as [ws [Hts [Hr [He [Hl _]]]]];
           exists ws; now auto);
      try discriminate.
    destruct (choose h c) as [t |].
    - destruct (admits c t) eqn:Ea; [| discriminate].
      destruct (step c t) as [c1 |] eqn:Es; [| discriminate].
      destruct (l <? reserve c1).
      + destruct (finish_sound _ _ _ _ _ _ _ H) as [ws [Hts [Hr [He [Hl _]]]]].
        exists ws. auto.
      + destruct (IH _ _ _ _ _ H) as [ws [Hts [Hr [He Hl]]]].
        exists (t :: ws). repeat split; auto.
        * rewrite Hts, <- app_assoc. reflexivity.
        * econstructor; eauto.
        * simpl. lia.
    - destruct (eos_ok c) eqn:He; [| discriminate].
      injection H as <- <- <-. exists []. repeat split; auto.
      + now rewrite app_nil_r.
      + constructor.
      + simpl. lia.
  Qed.

  (** Every stop, whatever the sampler, reserve and completion: a masked run
      from [c0] to a configuration where EOS is legal, its tokens and EOS
      within the budget. *)
  Theorem decode_stop_sound : forall budget c0 how ts c,
    decode budget c0 = Stop how ts c ->
    masked_run c0 ts c /\ eos_ok c = true /\ length ts + 1 <= budget.
  Proof.
    intros budget c0 how ts c H. unfold decode in H.
    destruct (budget <? reserve c0 + 1) eqn:Eb; [discriminate |].
    apply Nat.ltb_ge in Eb.
    destruct (run_sound _ _ _ _ _ _ H) as [ws [Hts [Hr [He Hl]]]].
    simpl in Hts. subst ws. repeat split; auto. lia.
  Qed.

  (** The hypotheses of termination.  [reachable] is any set of
      configurations closed under masked tokens (the viable ones, say); the
      reserve table is only asked about those. *)
  Variable reachable : Config -> Prop.
  Hypothesis reachable_step : forall c t c',
    reachable c -> admits c t = true -> step c t = Some c' -> reachable c'.
  (** [ReserveTable.completion] is legal token by token and ends where EOS is
      legal ... *)
  Hypothesis completion_legal : forall c,
    reachable c -> exists c', write c (completion c) = Some c' /\ eos_ok c' = true.
  (** ... and is no longer than the reserve (the code asserts equality). *)
  Hypothesis completion_within_reserve : forall c,
    reachable c -> length (completion c) <= reserve c.
  (** A masked token advances the lexer ([assert nxt is not None]). *)
  Hypothesis mask_advances : forall c t,
    reachable c -> admits c t = true -> step c t <> None.

  Definition admitted (c : Config) (x : choice Tok) : bool :=
    match x with
    | Emit t => admits c t
    | Eos => eos_ok c
    end.

  (** The sampler picks inside a non-empty mask. *)
  Hypothesis choose_admitted : forall h c,
    reachable c -> (exists x, admitted c x = true) -> admitted c (choose h c) = true.

  Lemma mask_nonempty_reachable : forall c,
    reachable c -> exists x, admitted c x = true.
  Proof.
    intros c Hc. destruct (completion_legal c Hc) as [c' [Hw He]].
    destruct (completion c) as [| t ts] eqn:Ec; simpl in Hw.
    - injection Hw as <-. exists Eos. exact He.
    - exists (Emit t). simpl. destruct (admits c t); [reflexivity | discriminate].
  Qed.

  Lemma finish_stops : forall how left h c,
    reachable c -> reserve c <= left ->
    exists ts c', finish how left h c = Stop how ts c'.
  Proof.
    intros how left h c Hc Hl. unfold finish.
    destruct (completion_legal c Hc) as [c' [Hw He]]. rewrite Hw, He.
    pose proof (completion_within_reserve c Hc) as Hr.
    assert (Hle : (length (completion c) <=? left) = true) by (apply Nat.leb_le; lia).
    rewrite Hle. simpl. eauto.
  Qed.

  Lemma run_stops : forall left h c,
    reachable c -> reserve c <= left ->
    exists how ts c', run left h c = Stop how ts c'.
  Proof.
    intros left h c Hc Hl. revert h c Hc Hl.
    induction left as [| l IH]; intros h c Hc Hl; rewrite run_eq.
    - assert (E : (reserve c <=? 0) = true) by (apply Nat.leb_le; exact Hl).
      rewrite E; cbn [negb].
      destruct (finish_stops by_reserve 0 h c Hc Hl) as [ts [c' H]]. eauto.
    - assert (E : (reserve c <=? S l) = true) by (apply Nat.leb_le; exact Hl).
      rewrite E; cbn [negb]. destruct (S l <=? reserve c + safety).
      + destruct (finish_stops by_reserve (S l) h c Hc Hl) as [ts [c' H]]. eauto.
      + pose proof (choose_admitted h c Hc (mask_nonempty_reachable c Hc)) as Ha.
        destruct (choose h c) as [t |]; simpl in Ha.
        * rewrite Ha. destruct (step c t) as [c1 |] eqn:Es.
          -- destruct (l <? reserve c1) eqn:El.
             ++ destruct (finish_stops by_early (S l) h c Hc Hl) as [ts [c' H]]. eauto.
             ++ apply Nat.ltb_ge in El.
                apply IH; [exact (reachable_step c t c1 Hc Ha Es) | exact El].
          -- exfalso. exact (mask_advances c t Hc Ha Es).
        * rewrite Ha. eauto.
  Qed.

  (** Theorem 4, the loop as written: from a reachable configuration whose
      reserve fits the budget (with EOS), every sampler's decode stops, never
      fails, and stops with EOS at a sentence within the budget.  No premise
      bounds the reserve's rise. *)
  Theorem termination_as_written : forall budget c0,
    reachable c0 -> reserve c0 + 1 <= budget ->
    exists how ts c, decode budget c0 = Stop how ts c /\
      masked_run c0 ts c /\ eos_ok c = true /\ length ts + 1 <= budget.
  Proof.
    intros budget c0 Hc Hb.
    assert (Hd : exists how ts c, decode budget c0 = Stop how ts c).
    { unfold decode. assert (E : (budget <? reserve c0 + 1) = false) by (apply Nat.ltb_ge; lia).
      rewrite E. apply run_stops; [exact Hc | lia]. }
    destruct Hd as [how [ts [c Hd]]]. exists how, ts, c. split; [exact Hd |].
    exact (decode_stop_sound _ _ _ _ _ Hd).
  Qed.

  Lemma run_no_early : (forall c t c', reachable c -> admits c t = true ->
      step c t = Some c' -> reserve c' <= reserve c + safety) ->
    forall left h c how ts c', reachable c ->
    run left h c = Stop how ts c' -> how <> by_early.
  Proof.
    intros Hgrow. induction left as [| l IH]; intros h c how ts c' Hc H; rewrite run_eq in H;
      destruct (negb (reserve c <=? _)); try discriminate;
      destruct (_ <=? reserve c + safety) eqn:Et;
      try (destruct (finish_sound _ _ _ _ _ _ _ H) as [_ [_ [_ [_ [_ ->]]]]]; discriminate);
      try discriminate.
    apply Nat.leb_gt in Et. destruct (choose h c) as [t |].
    - destruct (admits c t) eqn:Ea; [| discriminate].
      destruct (step c t) as [c1 |] eqn:Es; [| discriminate].
      destruct (l <? reserve c1) eqn:El.
      + apply Nat.ltb_lt in El. specialize (Hgrow c t c1 Hc Ea Es). lia.
      + exact (IH _ _ _ _ _ (reachable_step c t c1 Hc Ea Es) H).
    - destruct (eos_ok c); [| discriminate]. injection H as <- _ _. discriminate.
  Qed.

  (** With the growth bound (one admitted token raises the reserve by at most
      [safety]) the trigger alone keeps the invariant: the loop stops as in
      [termination_as_written] and never through the early trigger. *)
  Theorem termination_with_reserve :
    (forall c t c', reachable c -> admits c t = true ->
       step c t = Some c' -> reserve c' <= reserve c + safety) ->
    forall budget c0, reachable c0 -> reserve c0 + 1 <= budget ->
    exists how ts c, decode budget c0 = Stop how ts c /\ how <> by_early /\
      masked_run c0 ts c /\ eos_ok c = true /\ length ts + 1 <= budget.
  Proof.
    intros Hgrow budget c0 Hc Hb.
    destruct (termination_as_written budget c0 Hc Hb) as [how [ts [c [Hd Hrest]]]].
    exists how, ts, c. repeat split; try apply Hrest; auto.
    unfold decode in Hd. destruct (budget <? reserve c0 + 1); [discriminate |].
    exact (run_no_early Hgrow _ _ _ _ _ _ Hc Hd).
  Qed.
End Loop.

(** The early trigger is load-bearing.  Configurations are nesting depths,
    [true] opens and [false] closes, the reserve is the depth and the written
    completion closes every open level.  With [safety] 0, budget 2 (one token
    and EOS) and a sampler that always opens, the loop does not take the
    opening token: it stops through the early trigger with the empty
    sentence.  Taking the token would leave depth 1 with 0 tokens left, a
    reserve the budget cannot hold (the old trigger-only loop wedged there). *)
Theorem early_trigger_needed :
  let step := fun (c : nat) (t : bool) =>
    if t then Some (S c) else match c with 0 => None | S d => Some d end in
  let admits := fun (c : nat) (t : bool) => t || (0 <? c) in
  let eos_ok := fun c : nat => c =? 0 in
  let reserve := fun c : nat => c in
  let completion := fun c : nat => repeat false c in
  let choose := fun (_ : list bool) (_ : nat) => Emit true in
  (forall c, exists c', write step admits c (completion c) = Some c' /\ eos_ok c' = true) /\
  (forall c, length (completion c) <= reserve c) /\
  decode step admits eos_ok reserve completion 0 choose 2 0 = Stop by_early [] 0 /\
  admits 0 true = true /\ step 0 true = Some 1 /\ reserve 1 > 2 - 1 - 1.
Proof.
  intros step admits eos_ok reserve completion choose.
  split; [| split; [| split; [| split; [| split]]]].
  - intros c. exists 0. split; [| reflexivity].
    induction c as [| d IH]; [reflexivity |]. exact IH.
  - intros c. unfold completion, reserve. rewrite repeat_length. lia.
  - reflexivity.
  - reflexivity.
  - reflexivity.
  - unfold reserve. lia.
Qed.
