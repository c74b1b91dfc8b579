(** * Mask: soundness, dead-end freedom and EOS iff complete (theorem 2).

    Reference: DESIGN.md sections 4 (the mask) and 7 (soundness and
    completeness rows).

    Statements, for every alphabet [B], vocabulary ([spell], [special]) and
    language [L]:
    - [mask_sound]: every token the masked decoder emits keeps the output in
      Prefix(L), and no special token is ever emitted.  No precondition.
    - [viable_cases]: a viable prefix is a sentence or extends by one byte.
    - [mask_nonempty]: with a byte-complete vocabulary the mask is non-empty
      at every viable prefix.
    - [decode_never_stuck]: with a byte-complete vocabulary and a non-empty
      [L], the mask is non-empty after every masked decode.
    - [finished_iff_sentence]: a finished decode (EOS taken from the mask)
      spells a sentence of [L]; with a byte-complete vocabulary every
      sentence of [L] is spelled by some finished decode. *)

From Coq Require Import List.
Import ListNotations.
From GRID Require Import Lang.

Section Mask.
  Context {B Tok : Type}.
  Variable spell : Tok -> list B.
  Variable special : Tok -> Prop.
  Variable L : lang B.

  Local Notation mask := (mask spell special L).
  Local Notation decodes := (decodes spell special L).
  Local Notation finished := (finished spell special L).
  Local Notation output := (output spell).
  Local Notation byte_complete := (byte_complete spell special).

  Lemma decodes_snoc_inv : forall ts t,
    decodes (ts ++ [t]) -> decodes ts /\ mask (output ts) (Emit t).
  Proof.
    intros ts t H. inversion H as [Hnil | ts' t' Hd Hm Heq].
    - destruct ts; discriminate.
    - apply app_inj_tail in Heq as [-> ->]. auto.
  Qed.

  (** Soundness: each emitted token keeps the output viable; no special token
      is emitted. *)
  Theorem mask_sound : forall ts t,
    decodes (ts ++ [t]) ->
    Prefix L (output (ts ++ [t])) /\ ~ special t.
  Proof.
    intros ts t H. apply decodes_snoc_inv in H as [_ [Hs Hp]].
    rewrite output_snoc. auto.
  Qed.

  (** A viable prefix is either a sentence or extends by at least one byte. *)
  Lemma viable_cases : forall w,
    Prefix L w -> L w \/ exists b, Prefix L (w ++ [b]).
  Proof.
    intros w [s Hs]. destruct s as [| b s].
    - left. now rewrite app_nil_r in Hs.
    - right. exists b, s. now rewrite <- app_assoc.
  Qed.

  (** Dead-end freedom: a byte-complete vocabulary leaves a non-empty mask at
      every viable prefix. *)
  Theorem mask_nonempty : byte_complete ->
    forall w, Prefix L w -> exists c, mask w c.
  Proof.
    intros Hbc w Hw. destruct (viable_cases w Hw) as [HL | [b Hb]].
    - exists Eos. exact HL.
    - destruct (Hbc b) as [t [Hns Hsp]]. exists (Emit t). simpl.
      rewrite Hsp. auto.
  Qed.

  Lemma decodes_viable : (exists s, L s) ->
    forall ts, decodes ts -> Prefix L (output ts).
  Proof.
    intros [s Hs] ts H. destruct H as [| ts t Hd Hm].
    - exists s. exact Hs.
    - rewrite output_snoc. exact (proj2 Hm).
  Qed.

  (** Along any masked decode the mask never becomes empty. *)
  Theorem decode_never_stuck : byte_complete -> (exists s, L s) ->
    forall ts, decodes ts -> exists c, mask (output ts) c.
  Proof.
    intros Hbc Hne ts Hd. apply mask_nonempty; auto.
    now apply decodes_viable.
  Qed.

  (** A finished decode spells a sentence. *)
  Lemma finished_sound : forall ts, finished ts -> L (output ts).
  Proof. intros ts [_ H]. exact H. Qed.

  (** Every viable prefix is spelled by a masked decode (one token per byte). *)
  Lemma viable_reachable : byte_complete ->
    forall w, Prefix L w -> exists ts, decodes ts /\ output ts = w.
  Proof.
    intros Hbc w. induction w as [| b w IH] using rev_ind; intros Hw.
    - exists []. split; [constructor | reflexivity].
    - destruct IH as [ts [Hd Ho]].
      + destruct Hw as [s Hs]. exists (b :: s).
        now rewrite <- app_assoc in Hs.
      + destruct (Hbc b) as [t [Hns Hsp]]. exists (ts ++ [t]). split.
        * constructor; auto. simpl. rewrite Ho, Hsp. auto.
        * now rewrite output_snoc, Ho, Hsp.
  Qed.

  (** A finished decode is exactly a sentence of [L]. *)
  Theorem finished_iff_sentence : byte_complete ->
    forall w, L w <-> exists ts, finished ts /\ output ts = w.
  Proof.
    intros Hbc w. split.
    - intros HL. destruct (viable_reachable Hbc w) as [ts [Hd Ho]].
      + exists []. now rewrite app_nil_r.
      + exists ts. repeat split; auto. simpl. now rewrite Ho.
    - intros [ts [Hf Ho]]. rewrite <- Ho. now apply finished_sound.
  Qed.
End Mask.
