(** * FromFirst: what FROM-first SQL removes from the column-policy boundary.

    Reference: issue #17 ("column policy in the mask for FROM-first SQL");
    Rbac.v holds the impossibility this file answers.

    The impossibility (Rbac.column_policy_not_maskable) rests on one premise:
    a left-to-right state that merges two viable prefixes which differ only
    in the column read before the table is known ([SELECT a FROM] and
    [SELECT b FROM]).  In SELECT-first SQL the base configuration with the
    tables in scope is such a state: at the column position no table is in
    scope yet.  FROM-first SQL ([FROM t SELECT c], DuckDB's syntax) fixes the
    table set before any column, so the same state (the base configuration
    paired with the tables in scope, here whether t2 is in scope) merges no
    two viable prefixes whose viable continuations differ, and a mask over
    it is sound and complete for the policy.

    Statements:
    - [scope_state_fails_select_first]: over SELECT-first SQL, no mask over
      (base configuration, tables in scope) is sound and complete;
    - [from_first_no_merge]: over FROM-first SQL, two viable prefixes with
      one (base configuration, tables in scope) have the same viable next
      symbols: the impossibility's premise does not hold;
    - [from_first_scope_state_enforces]: hence a mask over that state is
      sound and complete for the column policy over FROM-first SQL. *)

From Coq Require Import List Bool.
Import ListNotations.
From GRID Require Import Lang Rbac.

(** The tables in scope of a prefix: in the example, whether t2 was read. *)
Definition scope (w : list sym) : bool := existsb is_t2 w.

(** The state: the base configuration paired with the tables in scope. *)
Definition scope_state (w : list sym) : list term * bool := (base_config w, scope w).

Theorem scope_state_fails_select_first :
  forall m : list term * bool -> sym -> Prop,
  ~ (state_mask_sound Lpol scope_state m /\ state_mask_complete Lpol scope_state m).
Proof. apply column_policy_not_maskable. reflexivity. Qed.

(** FROM-first: FROM t SELECT c, under the same column policy. *)
Definition Lff : lang sym := fun w =>
  exists c t, w = [FROM; t; SELECT; c] /\ (c = ColA \/ c = ColB) /\ (t = TabT1 \/ t = TabT2).

Definition Lpolff : lang sym := fun w => Lff w /\ policy w.

Definition is_tab (x : sym) : bool := match x with TabT1 | TabT2 => true | _ => false end.
Definition is_col (x : sym) : bool := match x with ColA | ColB => true | _ => false end.
Definition allowed (t c : sym) : bool := negb (is_t2 t && is_colb c).

(** The viable prefixes of [Lpolff], decided. *)
Definition viable_b (w : list sym) : bool :=
  match w with
  | [] => true
  | [FROM] => true
  | [FROM; t] => is_tab t
  | [FROM; t; SELECT] => is_tab t
  | [FROM; t; SELECT; c] => is_tab t && is_col c && allowed t c
  | _ => false
  end.

Definition syms : list sym := [SELECT; FROM; ColA; ColB; TabT1; TabT2].

Lemma syms_full : forall x, In x syms.
Proof. intros []; simpl; tauto. Qed.

Lemma policy_pair : forall t c, (t = TabT1 \/ t = TabT2) -> (c = ColA \/ c = ColB) ->
  (policy [FROM; t; SELECT; c] <-> allowed t c = true).
Proof.
  intros t c Ht Hc. unfold policy.
  destruct Ht as [-> | ->]; destruct Hc as [-> | ->]; simpl; intuition discriminate.
Qed.

Lemma viable_spec : forall w, Prefix Lpolff w <-> viable_b w = true.
Proof.
  intros w. split.
  - intros [s [[c [t [Hw [Hc Ht]]]] Hp]]. rewrite Hw in Hp.
    apply policy_pair in Hp; [| exact Ht | exact Hc].
    destruct w as [| x1 [| x2 [| x3 [| x4 [| x5 w]]]]]; try reflexivity;
      simpl in Hw; injection Hw; intros; subst; simpl;
      destruct Ht as [-> | ->]; destruct Hc as [-> | ->]; simpl in *; try reflexivity;
      try discriminate.
  - intros H.
    exists (skipn (length w) [FROM; nth 1 w TabT1; SELECT; nth 3 w ColA]).
    destruct w as [| x1 [| x2 [| x3 [| x4 [| x5 w]]]]]; [| | | | | simpl in H; destruct x1; try discriminate H; destruct x3; discriminate H];
      repeat match goal with x : sym |- _ => destruct x end;
      simpl in H; try discriminate H; simpl;
      (split; [do 2 eexists; split; [reflexivity | simpl; tauto] |
               unfold policy; simpl; intuition discriminate]).
Qed.

Definition viables : list (list sym) :=
  [ []; [FROM]; [FROM; TabT1]; [FROM; TabT2]; [FROM; TabT1; SELECT]; [FROM; TabT2; SELECT];
    [FROM; TabT1; SELECT; ColA]; [FROM; TabT1; SELECT; ColB]; [FROM; TabT2; SELECT; ColA] ].

Lemma viable_cases : forall w, viable_b w = true -> In w viables.
Proof.
  intros w H.
  destruct w as [| x1 [| x2 [| x3 [| x4 [| x5 w]]]]];
    [| | | | | simpl in H; destruct x1; try discriminate H; destruct x3; discriminate H];
    repeat match goal with x : sym |- _ => destruct x end;
    simpl in H; try discriminate H; simpl; tauto.
Qed.

Definition term_eqb (a b : term) : bool :=
  match a, b with
  | KSELECT, KSELECT | KFROM, KFROM | COLUMN, COLUMN | TABLE, TABLE => true
  | _, _ => false
  end.

Fixpoint terms_eqb (u v : list term) : bool :=
  match u, v with
  | [], [] => true
  | a :: u', b :: v' => term_eqb a b && terms_eqb u' v'
  | _, _ => false
  end.

Lemma terms_eqb_refl : forall u, terms_eqb u u = true.
Proof. induction u as [| [] u IH]; simpl; auto. Qed.

Definition state_eqb (w1 w2 : list sym) : bool :=
  terms_eqb (base_config w1) (base_config w2) && Bool.eqb (scope w1) (scope w2).

Lemma state_eqb_of_eq : forall w1 w2, scope_state w1 = scope_state w2 -> state_eqb w1 w2 = true.
Proof.
  intros w1 w2 H. unfold scope_state in H. injection H as H1 H2.
  unfold state_eqb. rewrite H1, H2, terms_eqb_refl. destruct (scope w2); reflexivity.
Qed.

(** Every pair of viable prefixes with one state, and every next symbol, decided. *)
Definition no_merge_b : bool :=
  forallb (fun w1 => forallb (fun w2 => forallb (fun x =>
    implb (state_eqb w1 w2) (Bool.eqb (viable_b (w1 ++ [x])) (viable_b (w2 ++ [x]))))
    syms) viables) viables.

Lemma no_merge_b_true : no_merge_b = true.
Proof. vm_compute. reflexivity. Qed.

Theorem from_first_no_merge : forall w1 w2 x,
  Prefix Lpolff w1 -> Prefix Lpolff w2 -> scope_state w1 = scope_state w2 ->
  Prefix Lpolff (w1 ++ [x]) -> Prefix Lpolff (w2 ++ [x]).
Proof.
  intros w1 w2 x H1 H2 Hst Hx. rewrite viable_spec in *.
  apply viable_cases in H1, H2. apply state_eqb_of_eq in Hst.
  pose proof no_merge_b_true as Hb. unfold no_merge_b in Hb.
  rewrite forallb_forall in Hb. specialize (Hb w1 H1).
  rewrite forallb_forall in Hb. specialize (Hb w2 H2).
  rewrite forallb_forall in Hb. specialize (Hb x (syms_full x)).
  rewrite Hst, Hx in Hb. simpl in Hb. destruct (viable_b (w2 ++ [x])); [reflexivity | discriminate].
Qed.

Theorem from_first_scope_state_enforces :
  exists m : list term * bool -> sym -> Prop,
    state_mask_sound Lpolff scope_state m /\ state_mask_complete Lpolff scope_state m.
Proof.
  exists (fun q x => exists w, Prefix Lpolff w /\ scope_state w = q /\ Prefix Lpolff (w ++ [x])).
  split.
  - intros w x Hw [w' [Hw' [Hst Hx]]]. exact (from_first_no_merge w' w x Hw' Hw Hst Hx).
  - intros w x Hw Hx. exists w. auto.
Qed.
