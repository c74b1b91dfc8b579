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

Section Inversion.
  Context {N T : Type}.
  Variable rules : list (N * list (N + T)).

  Lemma derives_nil_inv : forall w, derives rules [] w -> w = [].
  Proof. intros w H. inversion H. reflexivity. Qed.

  Lemma derives_t_inv : forall a rest w, derives rules (inr a :: rest) w ->
    exists w', w = a :: w' /\ derives rules rest w'.
  Proof. intros a rest w H. inversion H; subst. eauto. Qed.

  Lemma derives_n_inv : forall A rest w, derives rules (inl A :: rest) w ->
    exists rhs, In (A, rhs) rules /\ derives rules (rhs ++ rest) w.
  Proof. intros A rest w H. inversion H; subst. eauto. Qed.
End Inversion.

(** Unfold a derivation from a concrete grammar into its cases. *)
Ltac derives_inv :=
  repeat match goal with
  | H : derives _ [] _ |- _ => apply derives_nil_inv in H; subst
  | H : derives _ (inr _ :: _) _ |- _ =>
      let w := fresh "w" in
      apply derives_t_inv in H as [w [? H]]; subst
  | H : derives _ (inl _ :: _) _ |- _ =>
      let rhs := fresh "rhs" in let Hin := fresh "Hin" in
      apply derives_n_inv in H as [rhs [Hin H]]; simpl in Hin, H
  | H : _ \/ _ |- _ => destruct H as [H | H]
  | H : False |- _ => destruct H
  | E : (_, _) = (_, _) |- _ =>
      first [discriminate E | injection E; intros; subst; simpl in *]
  end.

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

  Lemma annots_sound : forall rhs p q rhs',
    In (q, rhs') (annots p rhs) -> annot p rhs q rhs'.
  Proof.
    induction rhs as [| [B | a] rest IH]; intros p q rhs'; simpl.
    - intros [E | []]. injection E; intros; subst. constructor.
    - rewrite in_flat_map. intros [r [_ Hin]].
      apply in_map_iff in Hin as [[q' g] [E Hin]].
      simpl in E. injection E; intros; subst. constructor. apply IH. exact Hin.
    - intros Hin. apply in_map_iff in Hin as [[q' g] [E Hin]].
      simpl in E. injection E; intros; subst. constructor. apply IH. exact Hin.
  Qed.

  Lemma annots_complete : forall p rhs q rhs',
    annot p rhs q rhs' -> In (q, rhs') (annots p rhs).
  Proof.
    intros p rhs q rhs' Ha.
    induction Ha as [p | p a rest q rest' Ha IHa | p B r rest q rest' Ha IHa]; simpl.
    - left. reflexivity.
    - apply in_map_iff. exists (q, rest'). auto.
    - apply in_flat_map. exists r. split; [apply qs_full |].
      apply in_map_iff. exists (q, rest'). auto.
  Qed.

  Lemma annots_spec : forall rhs p q rhs',
    In (q, rhs') (annots p rhs) <-> annot p rhs q rhs'.
  Proof.
    intros. split; [apply annots_sound | apply annots_complete].
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

  (** Inversion of [annot] by the shape of either list. *)
  Lemma annot_inv_lnil : forall p q g, annot p [] q g -> p = q /\ g = [].
  Proof. intros p q g H. inversion H; auto. Qed.

  Lemma annot_inv_lt : forall p a rest q g, annot p (inr a :: rest) q g ->
    exists g', g = inr a :: g' /\ annot (delta p a) rest q g'.
  Proof. intros p a rest q g H. inversion H; subst. eauto. Qed.

  Lemma annot_inv_ln : forall p B rest q g, annot p (inl B :: rest) q g ->
    exists r g', g = inl (Tri p B r) :: g' /\ annot r rest q g'.
  Proof. intros p B rest q g H. inversion H; subst. eauto. Qed.

  Lemma annot_inv_rnil : forall p alpha q, annot p alpha q [] -> p = q /\ alpha = [].
  Proof. intros p alpha q H. inversion H; auto. Qed.

  Lemma annot_inv_rt : forall p alpha q a g, annot p alpha q (inr a :: g) ->
    exists alpha', alpha = inr a :: alpha' /\ annot (delta p a) alpha' q g.
  Proof. intros p alpha q a g H. inversion H; subst. eauto. Qed.

  Lemma annot_inv_rn : forall p alpha q X g, annot p alpha q (inl X :: g) ->
    exists B r alpha', X = Tri p B r /\ alpha = inl B :: alpha' /\ annot r alpha' q g.
  Proof. intros p alpha q X g H. inversion H; subst. eauto 6. Qed.

  Lemma annot_app_inv : forall x y p q g, annot p (x ++ y) q g ->
    exists r g1 g2, g = g1 ++ g2 /\ annot p x r g1 /\ annot r y q g2.
  Proof.
    induction x as [| [B | a] x IH]; intros y p q g H; simpl in H.
    - exists p, [], g. repeat split; auto. constructor.
    - apply annot_inv_ln in H as [r [g' [-> H]]].
      destruct (IH _ _ _ _ H) as [r' [g1 [g2 [-> [H1 H2]]]]].
      exists r', (inl (Tri p B r) :: g1), g2. repeat split; auto. constructor. exact H1.
    - apply annot_inv_lt in H as [g' [-> H]].
      destruct (IH _ _ _ _ H) as [r' [g1 [g2 [-> [H1 H2]]]]].
      exists r', (inr a :: g1), g2. repeat split; auto. constructor. exact H1.
  Qed.

  Lemma product_sound : forall g w, derives prules g w ->
    forall p alpha q, annot p alpha q g ->
    derives rules alpha w /\ fold_left delta w p = q.
  Proof.
    intros g w H. induction H as [| a rest w Hd IH | X rhs' rest w Hin Hd IH];
      intros p alpha q Ha.
    - apply annot_inv_rnil in Ha as [-> ->]. split; [constructor | reflexivity].
    - apply annot_inv_rt in Ha as [alpha' [-> Ha]].
      destruct (IH _ _ _ Ha) as [H1 H2].
      split; [constructor; exact H1 | exact H2].
    - apply annot_inv_rn in Ha as [B [r [alpha' [-> [-> Ha]]]]].
      apply prules_tri in Hin as [rhs [Hr Har]].
      destruct (IH _ _ _ (annot_app _ _ _ _ Har _ _ _ Ha)) as [H1 H2].
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
      apply annot_inv_ln in Ha as [r [g' [-> Ha]]].
      apply annot_inv_lnil in Ha as [-> ->].
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
