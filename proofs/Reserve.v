(** * Reserve: termination with a token-denominated reserve (theorem 4).

    Reference: DESIGN.md section 7 (termination, mode 1) and section 8
    step 3 (the reserve trigger).

    Model.  [step c t] is the configuration after token [t]; [mask c t] says
    the mask admits [t] at [c] (EOS aside); [complete c] says EOS is admitted
    at [c] (the output is a sentence).  [reserve c] is the decoder's
    completion reserve in tokens, and [slack] the trigger's safety margin.
    The budget [b] counts the tokens still allowed before EOS.

    Hypotheses on the reserve (the code's obligations):
    - [reserve_zero_complete]: reserve 0 means EOS is admitted;
    - [reserve_met_stepwise]: a positive reserve is met one token at a time:
      some admitted token lowers it;
    - [reserve_growth]: one admitted token raises the reserve by at most
      [slack].

    The decoder ([allowed]): at budget [b] it is forced when
    [b <= reserve c + slack]; forced, it admits only tokens that lower the
    reserve (the guide's shortest completion is one such path); free, it
    admits the whole mask.  It never emits a token at budget 0, and admits
    EOS whenever the output is complete.  A sampler is any function of the
    history, configuration and budget that picks an admitted choice when
    there is one.

    Statements:
    - [termination_with_reserve]: for every such sampler, from any
      configuration whose reserve is within the budget, the decode stops
      with EOS at a complete configuration, after at most budget tokens, each
      admitted by the mask.
    - [zero_slack_can_wedge]: [slack] cannot be dropped: with a reserve that
      grows by one on an opening token and a trigger at [b <= reserve c],
      a run from budget 1 >= reserve 0 reaches a state where nothing is
      admitted. *)

From Coq Require Import List Arith Lia.
Import ListNotations.
From GRID Require Import Lang.

Section Reserve.
  Context {Config Tok : Type}.
  Variable step : Config -> Tok -> Config.
  Variable mask : Config -> Tok -> Prop.
  Variable complete : Config -> Prop.
  Variable reserve : Config -> nat.
  Variable slack : nat.

  (** The decoder's admitted choices at configuration [c] with budget [b]. *)
  Definition allowed (c : Config) (b : nat) (x : choice Tok) : Prop :=
    match x with
    | Eos => complete c
    | Emit t =>
        0 < b /\ mask c t /\
        (b <= reserve c + slack -> reserve (step c t) < reserve c)
    end.

  (** Tokens [ts] lead from [c] to [c'], each admitted by the mask. *)
  Inductive masked_run : Config -> list Tok -> Config -> Prop :=
  | run_nil c : masked_run c [] c
  | run_cons c t ts c' :
      mask c t -> masked_run (step c t) ts c' -> masked_run c (t :: ts) c'.

  Variable sample : list Tok -> Config -> nat -> choice Tok.

  (** The decode loop: [fuel] bounds the number of sampler calls. *)
  Fixpoint decode (fuel : nat) (h : list Tok) (c : Config) (b : nat)
    : option (list Tok * Config) :=
    match fuel with
    | 0 => None
    | S f =>
        match sample h c b with
        | Eos => Some ([], c)
        | Emit t =>
            match decode f (h ++ [t]) (step c t) (b - 1) with
            | Some (ts, c') => Some (t :: ts, c')
            | None => None
            end
        end
    end.

  Hypothesis reserve_zero_complete : forall c, reserve c = 0 -> complete c.
  Hypothesis reserve_met_stepwise : forall c,
    0 < reserve c -> exists t, mask c t /\ reserve (step c t) < reserve c.
  Hypothesis reserve_growth : forall c t,
    mask c t -> reserve (step c t) <= reserve c + slack.
  Hypothesis sample_respects_mask : forall h c b,
    (exists x, allowed c b x) -> allowed c b (sample h c b).

  Lemma allowed_exists : forall c b, reserve c <= b -> exists x, allowed c b x.
  Proof.
    intros c b Hb. destruct (reserve c) as [| r] eqn:Er.
    - exists Eos. simpl. auto.
    - destruct (reserve_met_stepwise c) as [t [Hm Hlt]]; [lia |].
      exists (Emit t). simpl. rewrite Er in *. repeat split; auto; lia.
  Qed.

  Lemma allowed_token_keeps_budget : forall c b t,
    allowed c b (Emit t) -> reserve c <= b ->
    reserve (step c t) <= b - 1.
  Proof.
    intros c b t [Hpos [Hm Hforced]] Hb.
    destruct (le_gt_dec b (reserve c + slack)) as [Hf | Hfree].
    - specialize (Hforced Hf). lia.
    - specialize (reserve_growth c t Hm). lia.
  Qed.

  Lemma decode_S : forall f h c b,
    decode (S f) h c b =
    match sample h c b with
    | Eos => Some ([], c)
    | Emit t =>
        match decode f (h ++ [t]) (step c t) (b - 1) with
        | Some (ts, c') => Some (t :: ts, c')
        | None => None
        end
    end.
  Proof. reflexivity. Qed.

  Lemma decode_ok : forall b h c, reserve c <= b ->
    exists ts c', decode (S b) h c b = Some (ts, c') /\
      complete c' /\ length ts <= b /\ masked_run c ts c'.
  Proof.
    induction b as [| b IH]; intros h c Hb.
    - pose proof (sample_respects_mask h c 0 (allowed_exists c 0 Hb)) as Ha.
      rewrite decode_S. destruct (sample h c 0) as [t |] eqn:Es; try rewrite Es in Ha.
      + destruct Ha as [Hpos _]. lia.
      + exists [], c. repeat split; auto. constructor.
    - pose proof (sample_respects_mask h c (S b) (allowed_exists c (S b) Hb)) as Ha.
      rewrite decode_S. destruct (sample h c (S b)) as [t |] eqn:Es; try rewrite Es in Ha.
      + pose proof (allowed_token_keeps_budget c (S b) t Ha Hb) as Hr.
        replace (S b - 1) with b in Hr by lia.
        destruct (IH (h ++ [t]) (step c t) Hr) as [ts [c' [Hd [Hc [Hl Hrun]]]]].
        replace (S b - 1) with b by lia. rewrite Hd.
        exists (t :: ts), c'. repeat split; auto.
        * simpl. lia.
        * constructor; auto. exact (proj1 (proj2 Ha)).
      + exists [], c. repeat split; auto; [simpl; lia | constructor].
  Qed.

  (** Every run with budget at least the initial reserve stops with EOS at a
      complete configuration within the budget, for any sampler that picks
      admitted choices. *)
  Theorem termination_with_reserve : forall c0 b0,
    reserve c0 <= b0 ->
    exists ts c, decode (S b0) [] c0 b0 = Some (ts, c) /\
      complete c /\ length ts <= b0 /\ masked_run c0 ts c.
  Proof. intros c0 b0 Hb. apply decode_ok. exact Hb. Qed.
End Reserve.

(** Why [slack]: configurations are nesting depths, [true] opens and
    [false] closes, the reserve is the depth.  The reserve hypotheses hold,
    the reserve grows by one on [true], and with the trigger at
    [b <= reserve c] (slack 0) the decoder may emit [true] at depth 0 with
    budget 1, after which nothing is admitted at depth 1 with budget 0. *)
Theorem zero_slack_can_wedge :
  let step := fun (c : nat) (t : bool) => if t then S c else pred c in
  let mask := fun (c : nat) (t : bool) => t = true \/ 0 < c in
  let complete := fun c : nat => c = 0 in
  let reserve := fun c : nat => c in
  (forall c, reserve c = 0 -> complete c) /\
  (forall c, 0 < reserve c -> exists t, mask c t /\ reserve (step c t) < reserve c) /\
  (forall c t, mask c t -> reserve (step c t) <= reserve c + 1) /\
  reserve 0 <= 1 /\
  allowed step mask complete reserve 0 0 1 (Emit true) /\
  (forall x, ~ allowed step mask complete reserve 0 (step 0 true) 0 x).
Proof.
  intros step mask complete reserve. subst step mask complete reserve. simpl.
  split; [intros c H; exact H |].
  split; [intros c Hc; exists false; split; [right; exact Hc | simpl; lia] |].
  split; [intros c [] _; simpl; lia |].
  split; [lia |].
  split.
  - split; [lia |]. split; [left; reflexivity | intros H; lia].
  - intros [t |] H; simpl in H; [lia | discriminate].
Qed.
