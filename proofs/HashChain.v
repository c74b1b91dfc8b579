(** * HashChain: tamper evidence of the audit chain (theorem 6).

    Reference: DESIGN.md section 9 (audit chain and seal).

    Model.  [H : Input -> Digest] is the hash (BLAKE2b over byte strings in
    the code; here any function over any [Input] type with decidable
    equality).  [enc i r h] is the input hashed for step [i], record [r] and
    previous head [h]; the chain starts from the constant [genesis] and
    step [i] moves the head from [h] to [H (enc i r h)].

    Hypothesis (the code's obligation): [enc] is injective in all three
    arguments, the step number included.

    Statements:
    - [chain_tamper_evident]: two different record sequences with the same
      head give a collision of [H] (two different inputs, one digest), or a
      record encoding that [H] maps to [genesis] (a preimage of the
      constant).
    - [chain_length_mismatch_collision]: with the step number inside the
      hash, two non-empty sequences of different lengths and the same head
      give a collision at their last step.
    - [chain_tamper_collision]: if [genesis] is itself [H g0] for an input
      [g0] that is no record encoding, the same situation gives a collision.
    - [truncation_valid]: a prefix of a valid log is a valid log: dropping
      records at the tail is invisible to the chain alone.
    - [seal_detects_truncation]: a seal anchored outside the log, carrying
      the record count and the head, rejects every strict truncation; and
      [seal_detects_tamper] shows that a log passing the seal with different
      records gives a collision or a genesis preimage. *)

From Coq Require Import List Arith Lia.
Import ListNotations.

Section HashChain.
  Context {Input Digest Rec : Type}.
  Variable input_eq_dec : forall x y : Input, {x = y} + {x <> y}.
  Variable H : Input -> Digest.
  Variable enc : nat -> Rec -> Digest -> Input.
  Variable genesis : Digest.

  (** Head after records [rs], starting at step [i] from head [h]. *)
  Fixpoint chain_from (i : nat) (h : Digest) (rs : list Rec) : Digest :=
    match rs with
    | [] => h
    | r :: rs' => chain_from (S i) (H (enc i r h)) rs'
    end.

  Definition head (rs : list Rec) : Digest := chain_from 0 genesis rs.

  Definition collision : Prop := exists x y, x <> y /\ H x = H y.
  (** A record encoding that hashes to the genesis constant. *)
  Definition genesis_preimage : Prop := exists i r h, H (enc i r h) = genesis.

  Lemma chain_from_snoc : forall rs i h r,
    chain_from i h (rs ++ [r]) = H (enc (i + length rs) r (chain_from i h rs)).
  Proof.
    induction rs as [| r0 rs IH]; intros i h r; simpl.
    - now rewrite Nat.add_0_r.
    - rewrite IH. now rewrite Nat.add_succ_r.
  Qed.

  Lemma head_snoc : forall rs r,
    head (rs ++ [r]) = H (enc (length rs) r (head rs)).
  Proof. intros. unfold head. now rewrite chain_from_snoc. Qed.

  Hypothesis enc_injective : forall i r h i' r' h',
    enc i r h = enc i' r' h' -> i = i' /\ r = r' /\ h = h'.

  (** Same head, different records: collision or genesis preimage. *)
  Theorem chain_tamper_evident : forall rs1 rs2,
    rs1 <> rs2 -> head rs1 = head rs2 -> collision \/ genesis_preimage.
  Proof.
    induction rs1 as [| r1 rs1 IH] using rev_ind; intros rs2 Hne Hh.
    - destruct rs2 as [| r2 rs2 _] using rev_ind.
      + contradiction Hne. reflexivity.
      + right. rewrite head_snoc in Hh. exists (length rs2), r2, (head rs2).
        unfold head at 1 in Hh. simpl in Hh. auto.
    - destruct rs2 as [| r2 rs2 _] using rev_ind.
      + right. rewrite head_snoc in Hh. exists (length rs1), r1, (head rs1).
        rewrite Hh. reflexivity.
      + rewrite !head_snoc in Hh.
        destruct (input_eq_dec (enc (length rs1) r1 (head rs1))
                               (enc (length rs2) r2 (head rs2))) as [Heq | Hdiff].
        * apply enc_injective in Heq as [_ [-> Hh']].
          apply (IH rs2); [| exact Hh'].
          intros ->. contradiction Hne. reflexivity.
        * left. exists (enc (length rs1) r1 (head rs1)),
                       (enc (length rs2) r2 (head rs2)). auto.
  Qed.

  (** What the step number buys: two non-empty sequences of different
      lengths with the same head collide at their last step already. *)
  Theorem chain_length_mismatch_collision : forall rs1 rs2,
    rs1 <> [] -> rs2 <> [] -> length rs1 <> length rs2 ->
    head rs1 = head rs2 -> collision.
  Proof.
    intros rs1 rs2 Hn1 Hn2 Hlen Hh.
    destruct (exists_last Hn1) as [rs1' [r1 ->]].
    destruct (exists_last Hn2) as [rs2' [r2 ->]].
    rewrite !head_snoc in Hh. rewrite !app_length in Hlen. simpl in Hlen.
    exists (enc (length rs1') r1 (head rs1')), (enc (length rs2') r2 (head rs2')).
    split; [| exact Hh].
    intros E. apply enc_injective in E as [E _]. apply Hlen. rewrite E. reflexivity.
  Qed.

  (** With a genesis that is the hash of a non-record input, tampering that
      keeps the head yields a collision. *)
  Theorem chain_tamper_collision : forall g0,
    genesis = H g0 -> (forall i r h, enc i r h <> g0) ->
    forall rs1 rs2, rs1 <> rs2 -> head rs1 = head rs2 -> collision.
  Proof.
    intros g0 Hg Hnot rs1 rs2 Hne Hh.
    destruct (chain_tamper_evident rs1 rs2 Hne Hh) as [Hc | [i [r [h Hx]]]]; [exact Hc |].
    exists (enc i r h), g0. split; [apply Hnot | congruence].
  Qed.

  (** A log entry: record, previous head as stored, head as stored. *)
  Definition entry : Type := (Rec * Digest * Digest)%type.

  (** The chain check a verifier runs without a seal. *)
  Fixpoint valid_from (i : nat) (prev : Digest) (log : list entry) : Prop :=
    match log with
    | [] => True
    | (r, p, h) :: log' => p = prev /\ h = H (enc i r prev) /\ valid_from (S i) h log'
    end.

  Definition valid_log (log : list entry) : Prop := valid_from 0 genesis log.

  Definition records (log : list entry) : list Rec := map (fun '(r, _, _) => r) log.

  Lemma last_cons : forall {A} (l : list A) x d, last (x :: l) d = last l x.
  Proof.
    intros A l. induction l as [| y l IH]; intros x d; [reflexivity |].
    change (last (y :: l) d = last (y :: l) x). now rewrite !IH.
  Qed.

  Lemma valid_from_head : forall log i prev,
    valid_from i prev log ->
    last (map (fun '(_, _, h) => h) log) prev = chain_from i prev (records log).
  Proof.
    induction log as [| [[r p] h] log IH]; intros i prev Hv; simpl in *.
    - reflexivity.
    - destruct Hv as [-> [-> Hv]]. rewrite <- (IH _ _ Hv). apply last_cons.
  Qed.

  (** The head a valid log ends on is the chain head of its records. *)
  Definition log_head (log : list entry) : Digest :=
    last (map (fun '(_, _, h) => h) log) genesis.

  Lemma valid_log_head : forall log, valid_log log -> log_head log = head (records log).
  Proof. intros log Hv. exact (valid_from_head log 0 genesis Hv). Qed.

  (** Unanchored tail truncation: a prefix of a valid log is a valid log. *)
  Theorem truncation_valid : forall l1 l2, valid_log (l1 ++ l2) -> valid_log l1.
  Proof.
    unfold valid_log. generalize 0 as i. generalize genesis as prev.
    intros prev i l1. revert prev i.
    induction l1 as [| [[r p] h] l1 IH]; intros prev i l2 Hv; simpl in *; auto.
    destruct Hv as [Hp [Hh Hv]]. repeat split; auto. exact (IH _ _ _ Hv).
  Qed.

  (** An anchored seal: the record count and the head, stored apart from the
      log (the stop-reason seal of DESIGN.md section 9 carries both). *)
  Definition seal_ok (log : list entry) (count : nat) (hd : Digest) : Prop :=
    valid_log log /\ length log = count /\ log_head log = hd.

  Theorem seal_detects_truncation : forall l1 l2 count hd,
    seal_ok (l1 ++ l2) count hd -> l2 <> [] -> ~ seal_ok l1 count hd.
  Proof.
    intros l1 l2 count hd [_ [Hlen _]] Hne [_ [Hlen1 _]].
    rewrite app_length in Hlen. destruct l2; [contradiction Hne; reflexivity |].
    simpl in Hlen. lia.
  Qed.

  Theorem seal_detects_tamper : forall log log' count hd,
    seal_ok log count hd -> seal_ok log' count hd ->
    records log <> records log' -> collision \/ genesis_preimage.
  Proof.
    intros log log' count hd [Hv [_ Hh]] [Hv' [_ Hh']] Hne.
    apply (chain_tamper_evident (records log) (records log') Hne).
    rewrite <- (valid_log_head log Hv), <- (valid_log_head log' Hv'). congruence.
  Qed.
End HashChain.
