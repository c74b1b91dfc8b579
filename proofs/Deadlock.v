(** * Deadlock: acceptance semantics deadlock at step 1 (theorem 1).

    Reference: DESIGN.md section 4 (why the mask is defined on Prefix(L)).

    The rejected semantics admits a token [t] at output [w] only when
    [w ++ spell t] is already a sentence of [L] ([acceptance_mask]).  If no
    sentence of [L] is one token long, that mask is empty at the empty
    prefix ([acceptance_mask_deadlocks]).  The prefix semantics of
    DESIGN.md section 4 does not deadlock: with a byte-complete vocabulary
    and a non-empty [L] its mask is non-empty after every decode
    ([prefix_semantics_no_deadlock]).  [deadlock_example] shows that the
    hypotheses of both theorems hold together on a concrete byte language,
    so neither theorem is vacuous. *)

From Coq Require Import List Strings.Byte.
Import ListNotations.
From GRID Require Import Lang Mask.

Section Deadlock.
  Context {B Tok : Type}.
  Variable spell : Tok -> list B.
  Variable special : Tok -> Prop.
  Variable L : lang B.

  (** No one-token sentence => the acceptance mask is empty at the start. *)
  Theorem acceptance_mask_deadlocks :
    (forall t, ~ special t -> ~ L (spell t)) ->
    forall t, ~ acceptance_mask spell special L [] t.
  Proof.
    intros Hno t [Hns HL]. exact (Hno t Hns HL).
  Qed.

  (** The prefix semantics never deadlocks (byte-complete vocabulary,
      non-empty language). *)
  Theorem prefix_semantics_no_deadlock :
    byte_complete spell special -> (exists s, L s) ->
    forall ts, decodes spell special L ts ->
    exists c, mask spell special L (output spell ts) c.
  Proof. apply decode_never_stuck. Qed.
End Deadlock.

(** A witness: bytes as the alphabet, one token per byte (none special),
    L = { "ab" }.  No sentence is one token long, the vocabulary is
    byte-complete, the acceptance mask at the start is empty, and the
    prefix mask at the start admits "a". *)
Definition ab_lang : lang byte := fun w => w = [x61; x62].

Theorem deadlock_example :
  (forall t : byte, ~ False -> ~ ab_lang [t]) /\
  byte_complete (fun b : byte => [b]) (fun _ => False) /\
  (forall t, ~ acceptance_mask (fun b : byte => [b]) (fun _ => False) ab_lang [] t) /\
  mask (fun b : byte => [b]) (fun _ => False) ab_lang [] (Emit x61).
Proof.
  split; [| split; [| split]].
  - intros t _ H. discriminate H.
  - intros b. exists b. auto.
  - apply acceptance_mask_deadlocks. intros t _ H. discriminate H.
  - simpl. split; [auto |]. exists [x62]. reflexivity.
Qed.
