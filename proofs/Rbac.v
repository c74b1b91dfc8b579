(** * Rbac: the column-policy boundary of the mask (theorem 5).

    Reference: DESIGN.md section 7, row "RBAC boundary".

    Model.  Symbols are whole lexemes (one symbol per keyword or
    identifier), not bytes.  A left-to-right state is any function [st] of
    the prefix read so far; a mask over it is any [m : State -> Sym -> Prop]
    and admits [x] after [w] when [m (st w) x].  The mask is sound for a
    language [P] when, at every viable prefix, what it admits stays viable,
    and complete when it admits everything that stays viable.

    The counterexample: the base language is SELECT c FROM t with columns
    [ColA], [ColB] and tables [TabT1], [TabT2]; the column policy says that
    column [ColB] may not be read from table [TabT2].  The base grammar's
    configuration after a prefix is modelled as the sequence of terminals
    shifted ([base_config]): identifiers enter it as their category
    (COLUMN, TABLE), as they do in an LR stack, so it does not record which
    column was selected.

    Statements:
    - [merged_state_defeats_mask]: if a state maps two viable prefixes to
      one value and some symbol keeps one of them viable but not the other,
      no mask over that state is both sound and complete.
    - [column_policy_not_maskable]: for the column policy, every state that
      does not distinguish "SELECT a FROM" from "SELECT b FROM" fails.
    - [base_configuration_cannot_enforce]: in particular every state
      computed from the base grammar's configuration fails.
    - [product_state_mask]: the converse in general: if the base state
      determines the base language's future (as an LR configuration does)
      and the policy is recognised by a deterministic automaton, a mask over
      the pair (base state, automaton state) is sound and complete for the
      intersection at every prefix.
    - [policy_language_context_free]: the policy-product language of the
      example is context-free (via BarHillel.v), and
      [product_state_enforces_policy] gives the mask over the richer state. *)

From Coq Require Import List Bool.
Import ListNotations.
From GRID Require Import Lang BarHillel.

Section Boundary.
  Context {Sym : Type}.

  Definition state_mask_sound {State : Type} (P : lang Sym) (st : list Sym -> State)
    (m : State -> Sym -> Prop) : Prop :=
    forall w x, Prefix P w -> m (st w) x -> Prefix P (w ++ [x]).

  Definition state_mask_complete {State : Type} (P : lang Sym) (st : list Sym -> State)
    (m : State -> Sym -> Prop) : Prop :=
    forall w x, Prefix P w -> Prefix P (w ++ [x]) -> m (st w) x.

  Lemma merged_state_defeats_mask :
    forall (P : lang Sym) (State : Type) (st : list Sym -> State) w1 w2 x,
    st w1 = st w2 -> Prefix P w1 -> Prefix P w2 ->
    Prefix P (w1 ++ [x]) -> ~ Prefix P (w2 ++ [x]) ->
    forall m, ~ (state_mask_sound P st m /\ state_mask_complete P st m).
  Proof.
    intros P State st w1 w2 x Hst H1 H2 Hx1 Hx2 m [Hs Hc].
    apply Hx2. apply (Hs w2 x H2). rewrite <- Hst. exact (Hc w1 x H1 Hx1).
  Qed.

  (** The converse: a state that determines the base language's future,
      paired with a deterministic automaton's state, carries a sound and
      complete mask for the intersection. *)
  Theorem product_state_mask :
    forall (L : lang Sym) (StL Q : Type) (stL : list Sym -> StL)
           (delta : Q -> Sym -> Q) (q0 : Q) (acc : Q -> bool),
    (forall w1 w2, stL w1 = stL w2 -> forall s, L (w1 ++ s) <-> L (w2 ++ s)) ->
    let P := fun w => L w /\ dfa_language delta q0 acc w in
    exists m : StL * Q -> Sym -> Prop,
      forall w x, m (stL w, fold_left delta w q0) x <-> Prefix P (w ++ [x]).
  Proof.
    intros L StL Q stL delta q0 acc Hres P.
    exists (fun sq x => exists w, stL w = fst sq /\ fold_left delta w q0 = snd sq /\
                                  Prefix P (w ++ [x])).
    intros w x. split.
    - intros [w' [Hs [Hq [s [HL HR]]]]]. simpl in Hs, Hq. exists s. split.
      + rewrite <- app_assoc. apply (Hres w' w Hs). rewrite app_assoc. exact HL.
      + unfold dfa_language in *. rewrite !fold_left_app in *. simpl in *.
        rewrite <- Hq. exact HR.
    - intros H. exists w. auto.
  Qed.
End Boundary.

(** ** The counterexample *)

Inductive sym : Type := SELECT | FROM | ColA | ColB | TabT1 | TabT2.
Inductive term : Type := KSELECT | KFROM | COLUMN | TABLE.

Definition term_of (x : sym) : term :=
  match x with
  | SELECT => KSELECT
  | FROM => KFROM
  | ColA | ColB => COLUMN
  | TabT1 | TabT2 => TABLE
  end.

(** The base grammar's configuration: the terminals shifted so far. *)
Definition base_config (w : list sym) : list term := map term_of w.

(** The base grammar: Query -> SELECT Col FROM Tab; Col -> a | b; Tab -> t1 | t2. *)
Inductive bn : Type := Query | Col | Tab.

Definition base_rules : list (bn * list (bn + sym)) :=
  [ (Query, [inr SELECT; inl Col; inr FROM; inl Tab]);
    (Col, [inr ColA]); (Col, [inr ColB]);
    (Tab, [inr TabT1]); (Tab, [inr TabT2]) ].

Definition Lbase : lang sym := fun w => derives base_rules [inl Query] w.

(** The column policy: column b may not be read from table t2. *)
Definition policy : lang sym := fun w => ~ (In ColB w /\ In TabT2 w).

Definition Lpol : lang sym := fun w => Lbase w /\ policy w.

Ltac solve_in := simpl; tauto.

Lemma Lbase_spec : forall w,
  Lbase w <-> exists c t, w = [SELECT; c; FROM; t] /\
                           (c = ColA \/ c = ColB) /\ (t = TabT1 \/ t = TabT2).
Proof.
  intros w. split.
  - intros H. unfold Lbase in H. derives_inv; eauto 7.
  - intros [c [t [-> [Hc Ht]]]]. unfold Lbase.
    apply der_n with (rhs := [inr SELECT; inl Col; inr FROM; inl Tab]); [solve_in |].
    simpl. apply der_t.
    destruct Hc as [-> | ->].
    + apply der_n with (rhs := [inr ColA]); [solve_in |]. simpl.
      apply der_t, der_t.
      destruct Ht as [-> | ->].
      * apply der_n with (rhs := [inr TabT1]); [solve_in |]. repeat constructor.
      * apply der_n with (rhs := [inr TabT2]); [solve_in |]. repeat constructor.
    + apply der_n with (rhs := [inr ColB]); [solve_in |]. simpl.
      apply der_t, der_t.
      destruct Ht as [-> | ->].
      * apply der_n with (rhs := [inr TabT1]); [solve_in |]. repeat constructor.
      * apply der_n with (rhs := [inr TabT2]); [solve_in |]. repeat constructor.
Qed.

Lemma Lbase_base_config : forall w,
  Lbase w <-> base_config w = [KSELECT; COLUMN; KFROM; TABLE].
Proof.
  intros w. rewrite Lbase_spec. split.
  - intros [c [t [-> [Hc Ht]]]].
    destruct Hc as [-> | ->]; destruct Ht as [-> | ->]; reflexivity.
  - unfold base_config. intros H.
    destruct w as [| x1 [| x2 [| x3 [| x4 [| x5 w]]]]]; try discriminate H.
    simpl in H. injection H as H1 H2 H3 H4.
    destruct x1; try discriminate H1; destruct x2; try discriminate H2;
      destruct x3; try discriminate H3; destruct x4; try discriminate H4;
      (do 2 eexists; split; [reflexivity | tauto]).
Qed.

(** The base configuration determines the base language's future. *)
Lemma base_config_residual : forall w1 w2,
  base_config w1 = base_config w2 -> forall s, Lbase (w1 ++ s) <-> Lbase (w2 ++ s).
Proof.
  intros w1 w2 H s. rewrite !Lbase_base_config. unfold base_config in *.
  rewrite !map_app, H. reflexivity.
Qed.

Lemma base_config_forgets_column :
  base_config [SELECT; ColA; FROM] = base_config [SELECT; ColB; FROM].
Proof. reflexivity. Qed.

Theorem column_policy_not_maskable :
  forall (State : Type) (st : list sym -> State),
  st [SELECT; ColA; FROM] = st [SELECT; ColB; FROM] ->
  forall m : State -> sym -> Prop,
  ~ (state_mask_sound Lpol st m /\ state_mask_complete Lpol st m).
Proof.
  intros State st Hst.
  apply (merged_state_defeats_mask Lpol State st _ _ TabT2 Hst).
  - exists [TabT1]. split; [apply Lbase_spec; do 2 eexists; split; [reflexivity | tauto] |
      unfold policy; simpl; intuition discriminate].
  - exists [TabT1]. split; [apply Lbase_spec; do 2 eexists; split; [reflexivity | tauto] |
      unfold policy; simpl; intuition discriminate].
  - exists []. split; [apply Lbase_spec; do 2 eexists; split; [reflexivity | tauto] |
      unfold policy; simpl; intuition discriminate].
  - intros [s [_ Hp]]. apply Hp. split; simpl; auto.
Qed.

(** Every state computed from the base grammar's configuration fails. *)
Corollary base_configuration_cannot_enforce :
  forall (State : Type) (f : list term -> State) (m : State -> sym -> Prop),
  ~ (state_mask_sound Lpol (fun w => f (base_config w)) m /\
     state_mask_complete Lpol (fun w => f (base_config w)) m).
Proof.
  intros State f. apply column_policy_not_maskable.
  rewrite base_config_forgets_column. reflexivity.
Qed.

(** ** The converse on the example *)

(** The policy automaton: has column b been read? has table t2 been read? *)
Definition pstate : Type := (bool * bool)%type.
Definition pstates : list pstate := [(false, false); (false, true); (true, false); (true, true)].

Definition is_colb (x : sym) : bool := match x with ColB => true | _ => false end.
Definition is_t2 (x : sym) : bool := match x with TabT2 => true | _ => false end.

Definition pdelta (q : pstate) (x : sym) : pstate :=
  (fst q || is_colb x, snd q || is_t2 x).
Definition pacc (q : pstate) : bool := negb (fst q && snd q).
Definition pq0 : pstate := (false, false).

Lemma pstates_full : forall q, In q pstates.
Proof. intros [[] []]; simpl; tauto. Qed.

Lemma pdelta_fold : forall w b1 b2,
  fold_left pdelta w (b1, b2) = (b1 || existsb is_colb w, b2 || existsb is_t2 w).
Proof.
  induction w as [| x w IH]; intros b1 b2; simpl.
  - now rewrite !orb_false_r.
  - unfold pdelta at 2. simpl. rewrite IH. now rewrite !orb_assoc.
Qed.

Lemma existsb_colb : forall w, existsb is_colb w = true <-> In ColB w.
Proof.
  intros w. rewrite existsb_exists. split.
  - intros [x [Hin Hx]]. destruct x; try discriminate Hx. exact Hin.
  - intros Hin. exists ColB. auto.
Qed.

Lemma existsb_t2 : forall w, existsb is_t2 w = true <-> In TabT2 w.
Proof.
  intros w. rewrite existsb_exists. split.
  - intros [x [Hin Hx]]. destruct x; try discriminate Hx. exact Hin.
  - intros Hin. exists TabT2. auto.
Qed.

Lemma policy_dfa : forall w, policy w <-> dfa_language pdelta pq0 pacc w.
Proof.
  intros w. unfold policy, dfa_language, pq0, pacc. rewrite pdelta_fold. simpl.
  rewrite <- existsb_colb, <- existsb_t2.
  destruct (existsb is_colb w), (existsb is_t2 w); simpl; intuition discriminate.
Qed.

Lemma Lbase_context_free : context_free Lbase.
Proof. exists bn, base_rules, Query. intros w. reflexivity. Qed.

(** The policy-product language is context-free. *)
Theorem policy_language_context_free : context_free Lpol.
Proof.
  destruct (context_free_inter_regular sym pstate Lbase pstates pstates_full
              pdelta pq0 pacc Lbase_context_free) as [N [rules [S H]]].
  exists N, rules, S. intros w. rewrite <- H. unfold Lpol.
  rewrite policy_dfa. reflexivity.
Qed.

(** A mask over (base configuration, policy state) enforces the policy
    soundly and completely. *)
Theorem product_state_enforces_policy :
  exists m : list term * pstate -> sym -> Prop,
    state_mask_sound Lpol (fun w => (base_config w, fold_left pdelta w pq0)) m /\
    state_mask_complete Lpol (fun w => (base_config w, fold_left pdelta w pq0)) m.
Proof.
  destruct (product_state_mask Lbase (list term) pstate base_config pdelta pq0 pacc
              base_config_residual) as [m Hm].
  assert (HP : forall u, Lpol u <-> Lbase u /\ dfa_language pdelta pq0 pacc u)
    by (intros u; unfold Lpol; rewrite policy_dfa; reflexivity).
  exists m. split.
  - intros w x _ Hx. apply Hm in Hx as [s Hs]. exists s. apply HP. exact Hs.
  - intros w x _ [s Hs]. apply Hm. exists s. apply HP. exact Hs.
Qed.
