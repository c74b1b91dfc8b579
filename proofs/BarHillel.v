(** * BarHillel: a context-free language meets a finite automaton.

    Reference: Y. Bar-Hillel, M. Perles, E. Shamir, "On formal properties of
    simple phrase structure grammars" (1961): the intersection of a
    context-free language with a regular language is context-free, by the
    triple construction (p, A, q).  Used by theorem 5's converse (Rbac.v).

    Model.  A context-free grammar over terminals [T] is a nonterminal type
    [N], a start symbol and a finite list of productions [(A, rhs)] with
    [rhs : list (N + T)].  [derives rules alpha w] is a leftmost derivation
    of the terminal string [w] from the sentential form [alpha].  A
    deterministic finite automaton is a state type [Q] listed in full by
    [qs], a start state, a transition function and a boolean acceptance
    test; it accepts [w] when [fold_left delta w q0] is accepting.

    Statements:
    - [product_language]: the product grammar (nonterminals [PStart] and
      [Tri p A q], productions built by list functions, hence finite)
      derives exactly the words the grammar derives and the automaton
      accepts.
    - [context_free_inter_regular]: [context_free] is closed under
      intersection with the language of a finite automaton. *)

From Coq Require Import List.
Import ListNotations.

Inductive derives {N T : Type} (rules : list (N * list (N + T)))
  : list (N + T) -> list T -> Prop :=
| der_nil : derives rules [] []
| der_t a rest w :
    derives rules rest w -> derives rules (inr a :: rest) (a :: w)
| der_n A rhs rest w :
    In (A, rhs) rules -> derives rules (rhs ++ rest) w ->
    derives rules (inl A :: rest) w.

(** A language is context-free when some finite grammar derives exactly it. *)
Definition context_free {T : Type} (P : list T -> Prop) : Prop :=
  exists (N : Type) (rules : list (N * list (N + T))) (S : N),
    forall w, P w <-> derives rules [inl S] w.

(** A language is regular when some finite automaton accepts exactly it. *)
Definition dfa_language {T Q : Type} (delta : Q -> T -> Q) (q0 : Q)
  (acc : Q -> bool) : list T -> Prop :=
  fun w => acc (fold_left delta w q0) = true.

Section Product.
  Context {N T Q : Type}.
  Variable rules : list (N * list (N + T)).
  Variable S : N.
  Variable qs : list Q.
  Hypothesis qs_full : forall q, In q qs.
  Variable delta : Q -> T -> Q.
  Variable q0 : Q.
  Variable acc : Q -> bool.

  Inductive pn : Type :=
  | PStart
  | Tri (p : Q) (A : N) (q : Q).

  (** [annot p rhs q rhs']: [rhs'] is [rhs] with each nonterminal [B]
      replaced by a triple [Tri p' B q'], the states chained from [p] to [q]
      and moved by [delta] over terminals. *)
  Inductive annot : Q -> list (N + T) -> Q -> list (pn + T) -> Prop :=
  | an_nil p : annot p [] p []
  | an_t p a rest q rest' :
      annot (delta p a) rest q rest' ->
      annot p (inr a :: rest) q (inr a :: rest')
  | an_n p B r rest q rest' :
      annot r rest q rest' ->
      annot p (inl B :: rest) q (inl (Tri p B r) :: rest').

  Fixpoint annots (p : Q) (rhs : list (N + T)) : list (Q * list (pn + T)) :=
    match rhs with
    | [] => [(p, [])]
    | inr a :: rest =>
        map (fun qr => (fst qr, inr a :: snd qr)) (annots (delta p a) rest)
    | inl B :: rest =>
        flat_map (fun r =>
          map (fun qr => (fst qr, inl (Tri p B r) :: snd qr)) (annots r rest)) qs
    end.

  Lemma annots_spec : forall rhs p q rhs',
    In (q, rhs') (annots p rhs) <-> annot p rhs q rhs'.
  Proof.
    induction rhs as [| [B | a] rest IH]; intros p q rhs'; simpl.
    - split.
      + intros [E | []]. injection E; intros; subst. constructor.
      + intros Ha. inversion Ha; subst. auto.
    - rewrite in_flat_map. split.
      + intros [r [_ Hin]]. apply in_map_iff in Hin as [[q' g] [E Hin]].
        simpl in E. injection E as -> <-. constructor. apply IH. exact Hin.
      + intros Ha. inversion Ha; subst. exists r. split; [apply qs_full |].
        apply in_map_iff. exists (q, rest'0). split; [reflexivity |].
        apply IH. assumption.
    - split.
      + intros Hin. apply in_map_iff in Hin as [[q' g] [E Hin]].
        simpl in E. injection E as -> <-. constructor. apply IH. exact Hin.
      + intros Ha. inversion Ha; subst. apply in_map_iff.
        exists (q, rest'0). split; [reflexivity |]. apply IH. assumption.
  Qed.

  Definition prules : list (pn * list (pn + T)) :=
    map (fun f => (PStart, [inl (Tri q0 S f)])) (filter acc qs) ++
    flat_map (fun Ar =>
      flat_map (fun p =>
        map (fun qr => (Tri p (fst Ar) (fst qr), snd qr)) (annots p (snd Ar))) qs)
      rules.

  Lemma prules_tri : forall p A q g,
    In (Tri p A q, g) prules <-> exists rhs, In (A, rhs) rules /\ annot p rhs q g.
  Proof.
    intros p A q g. unfold prules. rewrite in_app_iff, in_flat_map. split.
    - intros [Hs | [[A' rhs] [Hr Hin]]].
      + apply in_map_iff in Hs as [f [E _]]. discriminate E.
      + apply in_flat_map in Hin as [p' [_ Hin]].
        apply in_map_iff in Hin as [[q' g'] [E Hin]]. simpl in E.
        injection E as -> -> -> ->. exists rhs. split; auto.
        apply annots_spec. exact Hin.
    - intros [rhs [Hr Ha]]. right. exists (A, rhs). split; auto.
      apply in_flat_map. exists p. split; [apply qs_full |].
      apply in_map_iff. exists (q, g). split; [reflexivity |].
      apply annots_spec. exact Ha.
  Qed.

  Lemma prules_start : forall g,
    In (PStart, g) prules <-> exists f, acc f = true /\ g = [inl (Tri q0 S f)].
  Proof.
    intros g. unfold prules. rewrite in_app_iff, in_flat_map. split.
    - intros [Hs | [[A' rhs] [_ Hin]]].
      + apply in_map_iff in Hs as [f [E Hf]]. injection E as <-.
        apply filter_In in Hf as [_ Hf]. eauto.
      + apply in_flat_map in Hin as [p' [_ Hin]].
        apply in_map_iff in Hin as [[q' g'] [E _]]. discriminate E.
    - intros [f [Hf ->]]. left. apply in_map_iff. exists f. split; auto.
      apply filter_In. auto.
  Qed.

  Lemma annot_app : forall x p r g1, annot p x r g1 ->
    forall y q g2, annot r y q g2 -> annot p (x ++ y) q (g1 ++ g2).
  Proof.
    intros x p r g1 H. induction H; intros y q' g2 H2; simpl; try constructor; auto.
  Qed.

  Lemma annot_app_inv : forall x y p q g, annot p (x ++ y) q g ->
    exists r g1 g2, g = g1 ++ g2 /\ annot p x r g1 /\ annot r y q g2.
  Proof.
    induction x as [| [B | a] x IH]; intros y p q g H; simpl in H.
    - exists p, [], g. repeat split; auto. constructor.
    - inversion H; subst.
      destruct (IH _ _ _ _ H6) as [r' [g1 [g2 [-> [H1 H2]]]]].
      exists r', (inl (Tri p B r) :: g1), g2. repeat split; auto. constructor. exact H1.
    - inversion H; subst.
      destruct (IH _ _ _ _ H6) as [r' [g1 [g2 [-> [H1 H2]]]]].
      exists r', (inr a :: g1), g2. repeat split; auto. constructor. exact H1.
  Qed.

  Lemma product_sound : forall g w, derives prules g w ->
    forall p alpha q, annot p alpha q g ->
    derives rules alpha w /\ fold_left delta w p = q.
  Proof.
    intros g w H. induction H as [| a rest w Hd IH | X rhs' rest w Hin Hd IH];
      intros p alpha q Ha.
    - inversion Ha; subst. split; [constructor | reflexivity].
    - inversion Ha; subst. destruct (IH _ _ _ H5) as [H1 H2].
      split; [constructor; exact H1 | exact H2].
    - inversion Ha; subst.
      apply prules_tri in Hin as [rhs [Hr Har]].
      destruct (IH _ _ _ (annot_app _ _ _ _ Har _ _ _ H5)) as [H1 H2].
      split; [econstructor; eauto | exact H2].
  Qed.

  Lemma product_complete : forall alpha w, derives rules alpha w ->
    forall p, exists g, annot p alpha (fold_left delta w p) g /\ derives prules g w.
  Proof.
    intros alpha w H. induction H as [| a rest w Hd IH | A rhs rest w Hin Hd IH];
      intros p.
    - exists []. split; constructor.
    - destruct (IH (delta p a)) as [g [Ha Hg]]. exists (inr a :: g). split.
      + constructor. exact Ha.
      + constructor. exact Hg.
    - destruct (IH p) as [g [Ha Hg]].
      destruct (annot_app_inv _ _ _ _ _ Ha) as [r [g1 [g2 [-> [H1 H2]]]]].
      exists (inl (Tri p A r) :: g2). split.
      + constructor. exact H2.
      + apply der_n with (rhs := g1); [| exact Hg].
        apply prules_tri. eauto.
  Qed.

  Theorem product_language : forall w,
    derives prules [inl PStart] w <->
    derives rules [inl S] w /\ dfa_language delta q0 acc w.
  Proof.
    intros w. unfold dfa_language. split.
    - intros H. inversion H as [| | X g rest w' Hin Hd]; subst.
      apply prules_start in Hin as [f [Hf ->]].
      assert (Ha : annot q0 [inl S] f [inl (Tri q0 S f)]) by
        (constructor; constructor).
      destruct (product_sound _ _ Hd _ _ _ Ha) as [H1 H2].
      split; [exact H1 | rewrite H2; exact Hf].
    - intros [Hd Hacc]. destruct (product_complete _ _ Hd q0) as [g [Ha Hg]].
      inversion Ha; subst. inversion H5; subst.
      apply der_n with (rhs := [inl (Tri q0 S (fold_left delta w q0))]);
        [| exact Hg].
      apply prules_start. eauto.
  Qed.
End Product.

(** Context-free languages are closed under intersection with the language
    of a finite automaton. *)
Theorem context_free_inter_regular :
  forall (T Q : Type) (P : list T -> Prop) (qs : list Q),
  (forall q, In q qs) ->
  forall (delta : Q -> T -> Q) (q0 : Q) (acc : Q -> bool),
  context_free P ->
  context_free (fun w => P w /\ dfa_language delta q0 acc w).
Proof.
  intros T Q P qs Hqs delta q0 acc [N [rules [S HP]]].
  exists (@pn N Q), (prules rules S qs delta q0 acc), PStart. intros w.
  rewrite (product_language rules S qs Hqs delta q0 acc w), HP. reflexivity.
Qed.
