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
    - At the level of token ids (section [Ids]) the model follows the guide
      as written (grid_core/guide.py: [GridGuide.mask_and_ids],
      [Engine.pack_result], [GridGuide.accept_token]; grid_core/vocab.py):
      [eos] marks the EOS ids, every one of them special; the mask over ids
      [id_mask] admits an EOS id iff the output is a sentence, never another
      special id, and a non-special id iff the output stays viable; the
      guide [accepts] a token sequence when each id was in the mask at the
      output so far and no id follows an accepted EOS.

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

(** Token ids, special tokens included, as the guide handles them. *)
Section Ids.
  Context {B Tok : Type}.
  Variable spell : Tok -> list B.
  Variable special : Tok -> Prop.
  (** [eos t]: [t] is one of [Vocabulary.eos_ids]. *)
  Variable eos : Tok -> Prop.
  Variable L : lang B.

  (** The mask over ids at output [w]: CI ids U CD ids (non-special, viable)
      U EOS ids iff [w] is a sentence.  Other special ids are in no trie and
      never admitted. *)
  Definition id_mask (w : list B) (t : Tok) : Prop :=
    (eos t /\ L w) \/ (~ special t /\ Prefix L (w ++ spell t)).

  (** The guide accepts [ts] in order: each id was in the mask at the output
      so far, and nothing was accepted after an EOS id (the guide is then
      terminated).  EOS ids add no bytes to the output ([GridGuide.output]);
      before the end no EOS id occurs, so the output is [output spell ts]. *)
  Inductive accepts : list Tok -> Prop :=
  | accepts_nil : accepts []
  | accepts_snoc ts t :
      accepts ts -> Forall (fun u => ~ eos u) ts ->
      id_mask (output spell ts) t -> accepts (ts ++ [t]).
End Ids.
