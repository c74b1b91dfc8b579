(** * Cache: transparency of the mask cache under the minimal key premise (theorem 3).

    Reference: DESIGN.md section 6 (CI/CD split, OBL-KEY1) and section 8
    steps 4-5.  The code modelled is packages/grid-core/src/grid_core/guide.py
    ([Engine.compute_mask], [Engine.root_walk], [Engine._cached_walk],
    [Engine.verdict], [Engine.walk]), cache.py ([MaskTable.get],
    [MaskTable.publish], [Entry], [CDGroup]) and walk.py ([walk_from]).

    What the code caches and what it recomputes.  A cache entry is one walk
    ([Entry]): the CI token ids and the CD entries (trie node, emitted
    terminal, tail) of the trie walk of a configuration, published under the
    configuration's key ([GenericKey] or [IdentKey]: namespace, normal form
    of the remainder, allowed set, schema).  At every step, hit or miss, the
    mask is the union of the entry's CI ids, the ids of its CD entries that
    pass on the live stack (each class's terminal is shifted on the live
    stack; [Engine.verdict]), and the EOS ids iff [Lexer.eos_allowed] on the
    live configuration.

    Model.  [walk c] is the entry an uncached walk of configuration [c]
    publishes; [combine e c] is the step's mask from entry [e] and the live
    configuration [c] (for the code: CI ids of [e] U CD ids of [e] passing on
    [c]'s stack U EOS ids iff [c] is complete; section [Union] below).  A
    cache is a partial map from keys to entries, filled along the replay: a
    miss walks, publishes [walk c] under [key c] and serves
    [combine (walk c) c]; a hit on entry [e] serves [combine e c].

    The premise, [key_serves]: an entry published from one configuration,
    combined with the live part of any other configuration with the same
    key, gives that configuration's uncached mask.  It is the minimal
    premise: it holds iff every replay is transparent
    ([cache_transparency_iff], no side condition), and it is strictly weaker
    than equal walks under equal keys ([key_serves_weaker]): the split of a
    token between CI and passing CD may differ, only the union counts.

    Statements:
    - [cache_transparent]: under [key_serves], if every entry of the starting
      cache was published from some configuration, replaying any trace gives
      the uncached masks, and the cache stays that way (so traces may share
      one cache, as requests share T1 and T2).
    - [cache_transparency]: the same from an empty cache.
    - [key_soundness_necessary]: a key that breaks [key_serves] for [c1],
      [c2] makes the replay of "[c1], then [c2]" differ from the uncached
      masks at [c2].
    - [cache_transparency_iff]: [key_serves] holds exactly when every replay
      from an empty cache is transparent.
    - [key_sound_serves]: OBL-KEY1 as the code meets it (equal keys give
      equal walks: the walk reads the remainder only through its normal
      form, the allowed set and the lexicon) implies [key_serves], for every
      [combine], the code's union included.
    - [key_serves_weaker]: for the union mask, [key_serves] can hold where
      equal keys give different walks.
    - [memo_transparency_iff]: a memo of any function (nothing live), such
      as the per-group verdict memo keyed by (class, allowed set after the
      shift, lexicon) or the sub-walk cache keyed by (trie node, raw tail,
      allowed set), is transparent iff equal keys give equal values. *)

From Coq Require Import List Bool.
Import ListNotations.

Section Cache.
  Context {Config Key Entry Mask : Type}.
  Variable key : Config -> Key.
  Variable key_eq_dec : forall k1 k2 : Key, {k1 = k2} + {k1 <> k2}.
  Variable walk : Config -> Entry.
  Variable combine : Entry -> Config -> Mask.

  Definition cache : Type := Key -> option Entry.
  Definition empty_cache : cache := fun _ => None.

  Definition publish (m : cache) (k : Key) (v : Entry) : cache :=
    fun k' => if key_eq_dec k k' then Some v else m k'.

  (** The mask computed without a cache. *)
  Definition uncached (c : Config) : Mask := combine (walk c) c.

  (** One step with the cache: hit -> the stored entry; miss -> walk and
      publish.  The live part comes from [c] in both cases. *)
  Definition serve (m : cache) (c : Config) : Mask * cache :=
    match m (key c) with
    | Some e => (combine e c, m)
    | None => (combine (walk c) c, publish m (key c) (walk c))
    end.

  Fixpoint replay (m : cache) (tr : list Config) : list Mask * cache :=
    match tr with
    | [] => ([], m)
    | c :: tr' =>
        let (x, m') := serve m c in
        let (xs, m'') := replay m' tr' in
        (x :: xs, m'')
    end.

  (** The minimal premise. *)
  Definition key_serves : Prop :=
    forall c1 c2, key c1 = key c2 -> combine (walk c1) c2 = uncached c2.

  (** OBL-KEY1 in its strong form: equal keys, equal walks. *)
  Definition key_sound : Prop :=
    forall c1 c2, key c1 = key c2 -> walk c1 = walk c2.

  (** Every entry was published from a configuration with that key. *)
  Definition filled_from_configs (m : cache) : Prop :=
    forall k v, m k = Some v -> exists c, key c = k /\ walk c = v.

  Lemma empty_filled : filled_from_configs empty_cache.
  Proof. intros k v H. discriminate H. Qed.

  Lemma serve_transparent : key_serves -> forall m c,
    filled_from_configs m ->
    fst (serve m c) = uncached c /\ filled_from_configs (snd (serve m c)).
  Proof.
    intros Hks m c Hm. unfold serve.
    destruct (m (key c)) as [v |] eqn:E.
    - destruct (Hm _ _ E) as [c0 [Hk Hv]]. simpl. split; auto.
      rewrite <- Hv. exact (Hks c0 c Hk).
    - simpl. split; [reflexivity |].
      intros k v. unfold publish. destruct (key_eq_dec (key c) k) as [Heq | Hne].
      + intros H. injection H as <-. exists c. auto.
      + apply Hm.
  Qed.

  Theorem cache_transparent : key_serves -> forall tr m,
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

  Theorem cache_transparency : key_serves ->
    forall tr, fst (replay empty_cache tr) = map uncached tr.
  Proof.
    intros Hks tr. apply (cache_transparent Hks tr empty_cache empty_filled).
  Qed.

  Lemma replay_merge : forall c1 c2, key c1 = key c2 ->
    fst (replay empty_cache [c1; c2]) = [uncached c1; combine (walk c1) c2].
  Proof.
    intros c1 c2 Hk. simpl. unfold serve, empty_cache, publish.
    rewrite Hk. destruct (key_eq_dec (key c2) (key c2)) as [_ | Hne].
    - reflexivity.
    - contradiction Hne. reflexivity.
  Qed.

  (** Necessity: where [key_serves] fails for [c1], [c2], the replay
      "[c1] then [c2]" serves [c2] a mask other than its own. *)
  Theorem key_soundness_necessary : forall c1 c2,
    key c1 = key c2 -> combine (walk c1) c2 <> uncached c2 ->
    fst (replay empty_cache [c1; c2]) <> map uncached [c1; c2].
  Proof.
    intros c1 c2 Hk Hne H. rewrite replay_merge in H by exact Hk.
    simpl in H. injection H as H2. exact (Hne H2).
  Qed.

  Theorem cache_transparency_iff :
    key_serves <-> forall tr, fst (replay empty_cache tr) = map uncached tr.
  Proof.
    split.
    - apply cache_transparency.
    - intros Htr c1 c2 Hk. specialize (Htr [c1; c2]).
      rewrite replay_merge in Htr by exact Hk. simpl in Htr.
      injection Htr as H2. exact H2.
  Qed.

  Theorem key_sound_serves : key_sound -> key_serves.
  Proof.
    intros Hks c1 c2 Hk. unfold uncached. now rewrite (Hks c1 c2 Hk).
  Qed.
End Cache.

(** The code's mask: CI ids of the entry U the entry's CD ids that pass on
    the live configuration (the EOS ids iff it is complete count as live). *)
Section Union.
  Context {Config Entry Tok : Type}.
  Variable ci : Entry -> Tok -> bool.
  Variable pass : Entry -> Config -> Tok -> bool.

  Definition union_mask (e : Entry) (c : Config) : Tok -> bool :=
    fun t => ci e t || pass e c t.
End Union.

(** [key_serves] is strictly weaker than equal walks under equal keys: two
    configurations share a key; in one walk the token is CI, in the other it
    is a CD entry that passes on the live stack.  The union is the same
    whichever entry is served, so every replay is transparent, yet the
    walks differ. *)
Theorem key_serves_weaker :
  let key := fun _ : bool => tt in
  let walk := fun c : bool => c in
  let ci := fun (e : bool) (_ : unit) => e in
  let pass := fun (e : bool) (_ : bool) (_ : unit) => negb e in
  key_serves key walk (union_mask ci pass) /\
  ~ key_sound key walk /\
  (forall key_eq_dec tr,
     fst (replay key key_eq_dec walk (union_mask ci pass) empty_cache tr) =
     map (uncached walk (union_mask ci pass)) tr).
Proof.
  intros key walk ci pass.
  assert (Hs : key_serves key walk (union_mask ci pass)).
  { intros c1 c2 _. unfold uncached, union_mask, ci, pass, walk.
    destruct c1, c2; reflexivity. }
  split; [exact Hs | split].
  - intros H. specialize (H true false eq_refl). discriminate H.
  - intros key_eq_dec tr. exact (cache_transparency key key_eq_dec walk _ Hs tr).
Qed.

(** A memo of a function, with nothing live: [combine e _ = e]. *)
Theorem memo_transparency_iff :
  forall {X K V : Type} (k : X -> K) (key_eq_dec : forall k1 k2 : K, {k1 = k2} + {k1 <> k2})
    (f : X -> V),
  (forall x1 x2, k x1 = k x2 -> f x1 = f x2) <->
  (forall tr, fst (replay k key_eq_dec f (fun v _ => v) empty_cache tr) = map f tr).
Proof.
  intros X K V k key_eq_dec f.
  rewrite <- (cache_transparency_iff k key_eq_dec f (fun v _ => v)).
  unfold key_serves, uncached. tauto.
Qed.
