(** * Lang: languages, prefixes, vocabularies and the GRID mask.

    Reference: DESIGN.md sections 2 (bytes and tokens), 3 (the language L and
    Prefix(L)) and 4 (the mask).

    Policy decisions of this model:
    - An alphabet is any type [B].  The decoder's instance is Coq's
      [Init.Byte.byte], an inductive type with exactly 256 constructors
      [x00] .. [xff]; every theorem below is proved for every [B], so in
      particular for bytes.
    - A language is a predicate on [list B]; nothing about it is assumed
      (not decidability, not context-freeness) unless a theorem says so.
    - [Prefix L w] ("w is viable") holds when some extension of [w] is in [L].
      This is the specification's Prefix(L) read semantically; the
      operational scan-and-shift definition of DESIGN.md section 3 is the
      code's obligation to meet it (checked by the differential tests).
    - A vocabulary is a type of token ids [Tok], a spelling
      [spell : Tok -> list B] (DESIGN.md's token_bytes) and a predicate
      [special] marking EOS, BOS, pad and chat markers.  Ids, not
      spellings, are masked: two ids may share a spelling (an alias class).
    - A decoder choice is [Emit t] for a token id or [Eos]; EOS is a choice
      of its own so that it enters the mask only through the EOS gate.

    The mask of DESIGN.md section 4:
      M(w) = { t in V \ specials : w ++ spell t in Prefix(L) }  U  { EOS iff w in L } *)

From Coq Require Import List.
Import ListNotations.

(** A language over alphabet [B], and its prefix closure. *)
Definition lang (B : Type) : Type := list B -> Prop.

Definition Prefix {B : Type} (L : lang B) : lang B :=
  fun w => exists s, L (w ++ s).

(** One decoder choice: a token id, or end of sequence. *)
Inductive choice (Tok : Type) : Type :=
| Emit (t : Tok)
| Eos.
Arguments Emit {Tok} t.
Arguments Eos {Tok}.

Section Vocabulary.
  Context {B Tok : Type}.
  (** [spell t] is token_bytes(t); [special t] marks EOS, BOS, pad, chat markers. *)
  Variable spell : Tok -> list B.
  Variable special : Tok -> Prop.
  Variable L : lang B.

  (** The mask of DESIGN.md section 4, at output [w]. *)
  Definition mask (w : list B) (c : choice Tok) : Prop :=
    match c with
    | Emit t => ~ special t /\ Prefix L (w ++ spell t)
    | Eos => L w
    end.

  (** The rejected alternative: admit t when w ++ spell t is already a sentence. *)
  Definition acceptance_mask (w : list B) (t : Tok) : Prop :=
    ~ special t /\ L (w ++ spell t).

  (** Every single byte is the spelling of some non-special token. *)
  Definition byte_complete : Prop :=
    forall b : B, exists t, ~ special t /\ spell t = [b].

  (** The bytes a token sequence spells. *)
  Definition output (ts : list Tok) : list B := flat_map spell ts.

  (** [decodes ts]: the masked decoder can emit [ts], each token chosen inside
      the mask at the output so far. *)
  Inductive decodes : list Tok -> Prop :=
  | decodes_nil : decodes []
  | decodes_snoc ts t :
      decodes ts -> mask (output ts) (Emit t) -> decodes (ts ++ [t]).

  (** A finished decode: the tokens, then EOS taken from the mask. *)
  Definition finished (ts : list Tok) : Prop :=
    decodes ts /\ mask (output ts) Eos.

  Lemma output_snoc : forall ts t, output (ts ++ [t]) = output ts ++ spell t.
  Proof.
    intros ts t. unfold output. rewrite flat_map_app. simpl.
    now rewrite app_nil_r.
  Qed.
End Vocabulary.
