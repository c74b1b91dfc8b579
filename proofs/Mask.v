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
      sentence of [L] is spelled by some finished decode.
    - [finished_iff]: completeness over every tokenization, no precondition:
      a token sequence is a finished decode iff its tokens are non-special
      and spell a sentence.  (Byte-completeness is needed only for some
      tokenization to exist, as in [finished_iff_sentence].)

    At the level of token ids, special tokens included, with every EOS id
    special ([Lang.id_mask], [Lang.accepts]):
    - [accepts_iff]: the guide accepts a token sequence iff either none of
      its ids is special and it spells a viable prefix (or is empty), or it is
      such a sequence spelling a sentence followed by one EOS id.  No other
      special id is ever accepted, and nothing after an EOS.
    - [decodes_iff]: a token sequence followed by an EOS id is accepted iff
      its tokens are non-special and spell a sentence of [L].
    - [decodes_iff_tokenization]: for every byte string [w] and every
      tokenization [us] of [w] into non-special ids, and every EOS id [e],
      the guide accepts [us ++ [e]] iff [w] is in [L]. *)

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

Lemma Prefix_app_l : forall {B : Type} (L : lang B) w x, Prefix L (w ++ x) -> Prefix L w.
Proof.
  intros B L w x [s Hs]. exists (x ++ s). now rewrite app_assoc.
Qed.

Section Tokenizations.
  Context {B Tok : Type}.
  Variable spell : Tok -> list B.
  Variable special : Tok -> Prop.
  Variable L : lang B.

  Local Notation decodes := (decodes spell special L).
  Local Notation finished := (finished spell special L).
  Local Notation output := (output spell).
  Local Notation nonspecial := (Forall (fun t => ~ special t)).

  Lemma decodes_iff_viable : forall ts,
    decodes ts <-> nonspecial ts /\ (ts = [] \/ Prefix L (output ts)).
  Proof.
    intros ts. split.
    - intros H. destruct H as [| ts t Hd [Hs Hp]].
      + split; auto.
      + split; [| right; now rewrite output_snoc].
        clear Hp. induction Hd as [| us u Hd IH [Hu _]].
        * repeat constructor; auto.
        * apply Forall_app in IH as [IH1 IH2]. repeat (apply Forall_app; split); auto.
    - induction ts as [| t ts IH] using rev_ind; intros [Hns Hp].
      + constructor.
      + apply Forall_app in Hns as [Hns Ht]. inversion Ht; subst.
        destruct Hp as [Hnil | Hp]; [destruct ts; discriminate |].
        rewrite output_snoc in Hp. constructor.
        * apply IH. split; auto. right. exact (Prefix_app_l L _ _ Hp).
        * simpl. auto.
  Qed.

  (** Completeness over every tokenization. *)
  Theorem finished_iff : forall ts, finished ts <-> nonspecial ts /\ L (output ts).
  Proof.
    intros ts. unfold finished. simpl. rewrite decodes_iff_viable. split.
    - intros [[Hns _] HL]. auto.
    - intros [Hns HL]. repeat split; auto. right. exists []. now rewrite app_nil_r.
  Qed.

  Variable eos : Tok -> Prop.
  (** Every EOS id is special ([Vocabulary.check_invariants]). *)
  Hypothesis eos_special : forall t, eos t -> special t.

  Local Notation accepts := (accepts spell special eos L).

  Lemma nonspecial_no_eos : forall ts, nonspecial ts -> Forall (fun u => ~ eos u) ts.
  Proof.
    intros ts H. eapply Forall_impl; [| exact H]. intros u Hu He. exact (Hu (eos_special u He)).
  Qed.

  Lemma accepts_viable : forall ts,
    nonspecial ts -> (ts = [] \/ Prefix L (output ts)) -> accepts ts.
  Proof.
    induction ts as [| t ts IH] using rev_ind; intros Hns Hp.
    - constructor.
    - apply Forall_app in Hns as [Hns Ht]. inversion Ht; subst.
      destruct Hp as [Hnil | Hp]; [destruct ts; discriminate |].
      rewrite output_snoc in Hp. constructor.
      + apply IH; auto. right. exact (Prefix_app_l L _ _ Hp).
      + now apply nonspecial_no_eos.
      + right. auto.
  Qed.

  (** Every token sequence, special ids included: what the guide accepts. *)
  Theorem accepts_iff : forall ts,
    accepts ts <->
    (nonspecial ts /\ (ts = [] \/ Prefix L (output ts))) \/
    (exists us e, ts = us ++ [e] /\ eos e /\ nonspecial us /\ L (output us)).
  Proof.
    intros ts. split.
    - intros H. induction H as [| ts t Hacc IH Hne Hm].
      + left. auto.
      + destruct IH as [[Hns _] | [us [e [-> [He _]]]]].
        * destruct Hm as [[He HL] | [Hs Hp]].
          -- right. exists ts, t. auto.
          -- left. split.
             ++ apply Forall_app. auto.
             ++ right. now rewrite output_snoc.
        * apply Forall_app in Hne as [_ Hne]. inversion Hne; contradiction.
    - intros [[Hns Hp] | [us [e [-> [He [Hns HL]]]]]].
      + now apply accepts_viable.
      + constructor.
        * apply accepts_viable; auto. right. exists []. now rewrite app_nil_r.
        * now apply nonspecial_no_eos.
        * left. auto.
  Qed.

  (** A token sequence followed by an EOS id is decoded iff its tokens are
      non-special and spell a sentence. *)
  Theorem decodes_iff : forall us e, eos e ->
    accepts (us ++ [e]) <-> nonspecial us /\ L (output us).
  Proof.
    intros us e He. rewrite accepts_iff. split.
    - intros [[Hns _] | [us' [e' [Heq [_ [Hns HL]]]]]].
      + apply Forall_app in Hns as [_ Hns]. inversion Hns; subst.
        exfalso. auto.
      + apply app_inj_tail in Heq as [-> _]. auto.
    - intros [Hns HL]. right. exists us, e. auto.
  Qed.

  (** For every byte string and every tokenization of it into non-special
      ids: decodable (then EOS) under the mask iff it is a sentence. *)
  Theorem decodes_iff_tokenization : forall w us e,
    output us = w -> nonspecial us -> eos e -> (accepts (us ++ [e]) <-> L w).
  Proof.
    intros w us e Ho Hns He. rewrite (decodes_iff us e He), Ho. tauto.
  Qed.
End Tokenizations.
