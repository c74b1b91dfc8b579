#!/usr/bin/env bash
# proofs/check.sh -- build GRID's Coq proofs and check what they rest on.
#
# Usage: proofs/check.sh          (from any working directory)
#
# Checks, each counted as one pass or failure:
#   1. every .v file in proofs/ is listed in _CoqProject;
#   2. no proof is skipped: outside comments, no Admitted, admit, Axiom(s),
#      Conjecture, unset guard/positivity/universe checking or bypass_check;
#      a Parameter is allowed only with a `(* hypothesis: ... *)` comment on
#      the same or the previous line (and is listed);
#   3. each file of _CoqProject compiles, in order, in a fresh temporary
#      directory (a clean build every run; nothing is written to proofs/);
#   4. for each main theorem in theorems.txt, `Print Assumptions` answers
#      "Closed under the global context", or lists exactly the hypotheses the
#      line declares.
# Installs Coq from the distribution (apt-get install coq) when coqc is
# missing.  The last line printed is `N passed, M failed`; the exit status is
# non-zero when M > 0.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
passed=0
failed=0
t0=$(date +%s%N)

pass() { passed=$((passed + 1)); printf 'ok    %s\n' "$1"; }
fail() { failed=$((failed + 1)); printf 'FAIL  %s\n' "$1"; }
summary() {
  local t1
  t1=$(date +%s%N)
  printf 'elapsed %d.%03d s\n' $(( (t1 - t0) / 1000000000 )) $(( (t1 - t0) / 1000000 % 1000 ))
  printf '%d passed, %d failed\n' "$passed" "$failed"
  [ "$failed" -eq 0 ]
}

# --- Coq --------------------------------------------------------------------
if ! command -v coqc >/dev/null 2>&1; then
  echo "coqc not found: installing coq with apt-get" >&2
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo); fi
  fi
  if "${sudo_cmd[@]}" apt-get update -qq \
     && DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" \
        apt-get install -y -qq --no-install-recommends coq >/dev/null; then
    pass "install coq"
  else
    fail "install coq (need root or sudo and a Debian/Ubuntu package source)"
    summary
    exit 1
  fi
fi
echo "using $(coqc --version | head -n 1)"

# --- 1. the file list ---------------------------------------------------------
mapfile -t files < <(grep -E '^[^#-].*\.v[[:space:]]*$' "$here/_CoqProject" | sed 's/[[:space:]]//g')
unlisted=()
missing=()
for f in "${files[@]}"; do [ -f "$here/$f" ] || missing+=("$f"); done
for path in "$here"/*.v; do
  name="$(basename "$path")"
  listed=0
  for f in "${files[@]}"; do [ "$f" = "$name" ] && listed=1; done
  [ "$listed" -eq 1 ] || unlisted+=("$name")
done
if [ "${#files[@]}" -eq 0 ]; then
  fail "_CoqProject lists no .v file"
elif [ "${#unlisted[@]}" -gt 0 ]; then
  fail "not listed in _CoqProject: ${unlisted[*]}"
elif [ "${#missing[@]}" -gt 0 ]; then
  fail "listed in _CoqProject but missing: ${missing[*]}"
else
  pass "every .v file is listed in _CoqProject (${#files[@]} files)"
fi

# --- 2. nothing skipped -------------------------------------------------------
# Blank out (possibly nested) comments, keeping line numbers, so that words in
# prose do not count.
strip_comments() {
  awk '
    BEGIN { depth = 0; instr = 0 }
    {
      out = ""; n = length($0)
      for (i = 1; i <= n; i++) {
        c = substr($0, i, 1); d = substr($0, i, 2)
        if (instr) {
          if (depth == 0) out = out c
          if (c == "\"") instr = 0
        } else if (d == "(*") {
          depth++; i++
        } else if (depth > 0 && d == "*)") {
          depth--; i++
        } else if (depth == 0) {
          out = out c
          if (c == "\"") instr = 1
        }
      }
      print out
    }' "$1"
}
forbidden='\b(Admitted|admit|Axiom|Axioms|Conjecture|bypass_check)\b|Unset[[:space:]]+(Guard|Positivity|Universe)[[:space:]]+Checking'
bad=()
params=()
for src in "$here"/*.v; do
  f="$(basename "$src")"
  stripped="$(strip_comments "$src")"
  while IFS= read -r hit; do
    [ -n "$hit" ] && bad+=("$f:$hit")
  done < <(printf '%s\n' "$stripped" | grep -nE "$forbidden" || true)
  while IFS=: read -r lineno _; do
    [ -n "$lineno" ] || continue
    prev=$((lineno > 1 ? lineno - 1 : 1))
    if sed -n "${prev},${lineno}p" "$src" | grep -q '(\* *hypothesis:'; then
      params+=("$f:$lineno: $(sed -n "${lineno}p" "$src" | sed 's/^[[:space:]]*//')")
    else
      bad+=("$f:$lineno: Parameter without a (* hypothesis: ... *) comment")
    fi
  done < <(printf '%s\n' "$stripped" | grep -nE '\bParameters?\b' || true)
done
if [ "${#bad[@]}" -eq 0 ]; then
  pass "no Admitted, admit, Axiom or undeclared Parameter"
else
  fail "skipped or assumed proofs:"
  printf '        %s\n' "${bad[@]}"
fi
if [ "${#params[@]}" -gt 0 ]; then
  echo "      declared hypotheses (Parameter):"
  printf '        %s\n' "${params[@]}"
fi

# --- 3. clean build -----------------------------------------------------------
build="$(mktemp -d "${TMPDIR:-/tmp}/grid-proofs.XXXXXX")"
trap 'rm -rf "$build"' EXIT
cp "$here"/*.v "$here/_CoqProject" "$build"/
for f in "${files[@]}"; do
  if log="$(cd "$build" && coqc -q -Q . GRID "$f" 2>&1)"; then
    if [ -n "$log" ]; then
      fail "build $f (warnings or output)"
      printf '%s\n' "$log" | sed 's/^/        /'
    else
      pass "build $f"
    fi
  else
    fail "build $f"
    printf '%s\n' "$log" | sed 's/^/        /'
  fi
done

# --- 4. Print Assumptions -----------------------------------------------------
mapfile -t theorems < <(grep -vE '^[[:space:]]*(#|$)' "$here/theorems.txt")
modules="$(printf '%s\n' "${files[@]}" | sed 's/\.v$//' | tr '\n' ' ')"
# One file of `Print Assumptions`, one line per theorem; a line that does not
# run (an unknown name) is recorded, dropped, and the file is run again.
declare -A broken=()
for _ in "${!theorems[@]}" x; do
  {
    printf 'From GRID Require Import %s.\n' "$modules"
    for i in "${!theorems[@]}"; do
      [ -n "${broken[$i]:-}" ] && continue
      read -r _ name _ <<< "${theorems[$i]}"
      printf 'Redirect "assume_%d" Print Assumptions %s. (* %d *)\n' "$i" "$name" "$i"
    done
  } > "$build/Assumptions.v"
  rm -f "$build"/assume_*.out
  if (cd "$build" && coqc -q -Q . GRID Assumptions.v >"$build/assume.log" 2>&1); then
    break
  fi
  line="$(sed -n 's/^File "\.\/Assumptions\.v", line \([0-9]*\),.*/\1/p' "$build/assume.log" | head -n 1)"
  idx="$(sed -n "${line:-0}s/.*(\* \([0-9]*\) \*)$/\1/p" "$build/Assumptions.v")"
  if [ -z "$idx" ]; then  # the Require itself failed: nothing can be checked
    for i in "${!theorems[@]}"; do broken[$i]="$(tail -n 3 "$build/assume.log" | tr '\n' ' ')"; done
    break
  fi
  broken[$idx]="$(grep -v '^File' "$build/assume.log" | tr '\n' ' ')"
done
for i in "${!theorems[@]}"; do
  read -r tag name expected <<< "${theorems[$i]}"
  label="$tag $name"
  out="$build/assume_$i.out"
  if [ -n "${broken[$i]:-}" ] || [ ! -s "$out" ]; then
    fail "$label: Print Assumptions did not run: ${broken[$i]:-no output}"
    continue
  fi
  if [ "$expected" = "closed" ]; then
    if grep -q 'Closed under the global context' "$out"; then
      pass "$label: closed"
    else
      fail "$label: expected closed, got:"
      sed 's/^/        /' "$out"
    fi
  else
    got="$(grep -E '^[^[:space:]].* :' "$out" | sed 's/ :.*//' | sort -u | paste -sd, -)"
    want="$(printf '%s\n' "$expected" | tr ',' '\n' | sed '/^$/d' | sort -u | paste -sd, -)"
    if [ "$got" = "$want" ]; then
      pass "$label: assumes exactly $want"
    else
      fail "$label: expected assumptions {$want}, got {$got}"
    fi
  fi
done

summary
