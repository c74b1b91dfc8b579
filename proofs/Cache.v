(** * Cache: transparency of the CI mask cache under OBL-KEY1 (theorem 3).

    Reference: DESIGN.md section 6 (CI/CD split, OBL-KEY1) and section 8
    steps 4-5.

    Model.  Configurations, keys, CI masks, CD residues and full masks are
    abstract types.  [key c] is the cache key of configuration [c] (the T1 or
    T2 key); [ci c] its context-independent mask (what the trie walk would
    publish); [cd c] the CD residue's verdicts computed from the live stack
    of [c]; [combine] forms the step's mask from the two.  A cache is a
    partial map from keys to CI masks, filled along the replay: on a miss
    the walk's result [ci c] is published under [key c]; on a hit the stored
    CI mask is used.  The CD residue is never cached: it is recomputed from
    [c] at every step.

    Statements:
    - [cache_transparent]: if keys are sound (same key => same CI mask) and
      every entry of the starting cache was published from some
      configuration, replaying any trace gives the uncached masks, and the
      cache stays that way (so traces may share one cache, as requests do).
    - [cache_transparency]: the same from an empty cache.
    - [key_soundness_necessary]: if [combine] keeps CI differences visible
      (injective in its CI argument for a fixed CD residue), a key that
      merges two configurations with different CI masks makes the replay of
      the trace "one, then the other" differ from the uncached masks.
    - [cache_transparency_iff]: under that injectivity, key soundness holds
      exactly when every replay from an empty cache is transparent. *)

From Coq Require Import List.
Import ListNotations.

Section Cache.
  Context {Config Key CI CD Mask : Type}.
  Variable key : Config -> Key.
  Variable key_eq_dec : forall k1 k2 : Key, {k1 = k2} + {k1 <> k2}.
  Variable ci : Config -> CI.
  Variable cd : Config -> CD.
  Variable combine : CI -> CD -> Mask.

  Definition cache : Type := Key -> option CI.
  Definition empty_cache : cache := fun _ => None.

  Definition publish (m : cache) (k : Key) (v : CI) : cache :=
    fun k' => if key_eq_dec k k' then Some v else m k'.

  (** The mask computed without a cache. *)
  Definition uncached (c : Config) : Mask := combine (ci c) (cd c).

  (** One step with the cache: hit -> stored CI mask; miss -> walk and publish.
      The CD residue comes from the live configuration in both cases. *)
  Definition serve (m : cache) (c : Config) : Mask * cache :=
    match m (key c) with
    | Some v => (combine v (cd c), m)
    | None => (combine (ci c) (cd c), publish m (key c) (ci c))
    end.

  Fixpoint replay (m : cache) (tr : list Config) : list Mask * cache :=
    match tr with
    | [] => ([], m)
    | c :: tr' =>
        let (x, m') := serve m c in
        let (xs, m'') := replay m' tr' in
        (x :: xs, m'')
    end.

  (** OBL-KEY1. *)
  Definition key_sound : Prop :=
    forall c1 c2, key c1 = key c2 -> ci c1 = ci c2.

  (** Every entry was published from a configuration with that key. *)
  Definition filled_from_configs (m : cache) : Prop :=
    forall k v, m k = Some v -> exists c, key c = k /\ ci c = v.

  Lemma empty_filled : filled_from_configs empty_cache.
  Proof. intros k v H. discriminate H. Qed.

  Lemma serve_transparent : key_sound -> forall m c,
    filled_from_configs m ->
    fst (serve m c) = uncached c /\ filled_from_configs (snd (serve m c)).
  Proof.
    intros Hks m c Hm. unfold serve.
    destruct (m (key c)) as [v |] eqn:E.
    - destruct (Hm _ _ E) as [c0 [Hk Hv]]. simpl. split; auto.
      unfold uncached. rewrite <- Hv. rewrite (Hks c0 c Hk). reflexivity.
    - simpl. split; [reflexivity |].
      intros k v. unfold publish. destruct (key_eq_dec (key c) k) as [Heq | Hne].
      + intros H. injection H as <-. exists c. auto.
      + apply Hm.
  Qed.

  Theorem cache_transparent : key_sound -> forall tr m,
    filled_from_configs m ->
    fst (replay m tr) = map uncached tr /\ filled_from_configs (snd (replay m tr)).
  Proof.
    intros Hks tr. induction tr as [| c tr IH]; intros m Hm.
    - simpl. auto.
    - simpl. destruct (serve_transparent Hks m c Hm) as [H1 H2].
      destruct (serve m c) as [x m'] eqn:Es. simpl in H1, H2.
      destruct (IH m' H2) as [H3 H4].
      destruct (replay m' tr) as [xs m''] eqn:Er. simpl in *.
      subst. auto.
  Qed.

  Theorem cache_transparency : key_sound ->
    forall tr, fst (replay empty_cache tr) = map uncached tr.
  Proof.
    intros Hks tr. apply (cache_transparent Hks tr empty_cache empty_filled).
  Qed.

  Lemma replay_merge : forall c1 c2, key c1 = key c2 ->
    fst (replay empty_cache [c1; c2]) =
    [combine (ci c1) (cd c1); combine (ci c1) (cd c2)].
  Proof.
    intros c1 c2 Hk. simpl. unfold serve, empty_cache, publish.
    rewrite Hk. destruct (key_eq_dec (key c2) (key c2)) as [_ | Hne].
    - reflexivity.
    - contradiction Hne. reflexivity.
  Qed.

  (** Necessity: a key that merges two configurations with different CI
      masks makes the replay "c1 then c2" differ from the uncached masks. *)
  Theorem key_soundness_necessary :
    (forall v1 v2 d, combine v1 d = combine v2 d -> v1 = v2) ->
    forall c1 c2, key c1 = key c2 -> ci c1 <> ci c2 ->
    fst (replay empty_cache [c1; c2]) <> map uncached [c1; c2].
  Proof.
    intros Hinj c1 c2 Hk Hne H. rewrite replay_merge in H by exact Hk.
    simpl in H. unfold uncached in H.
    assert (H2 : combine (ci c1) (cd c2) = combine (ci c2) (cd c2)) by congruence.
    exact (Hne (Hinj _ _ _ H2)).
  Qed.

  Theorem cache_transparency_iff :
    (forall v1 v2 d, combine v1 d = combine v2 d -> v1 = v2) ->
    (key_sound <-> forall tr, fst (replay empty_cache tr) = map uncached tr).
  Proof.
    intros Hinj. split.
    - apply cache_transparency.
    - intros Htr c1 c2 Hk. specialize (Htr [c1; c2]).
      rewrite replay_merge in Htr by exact Hk. simpl in Htr. unfold uncached in Htr.
      assert (H2 : combine (ci c1) (cd c2) = combine (ci c2) (cd c2)) by congruence.
      exact (Hinj _ _ _ H2).
  Qed.
End Cache.
