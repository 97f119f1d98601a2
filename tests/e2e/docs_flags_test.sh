#!/usr/bin/env bash
# Every `--flag` an operator document writes is one the built binary knows.
#
#   docs_flags_test.sh SKIPSWARM DOC.md...
#
# What is checked, per document:
#  - in fenced code blocks (lines joined at a trailing '\'): the flags after
#    `skipswarm CMD` (or `.../skipswarm CMD`) up to the end of that command
#    (`#`, `|`, `&&`, `;`, `>`), against `skipswarm CMD --helpfull`;
#    `skipswarm --FLAG` against the top-level flags;
#  - in inline code spans: the same for a span that runs `skipswarm CMD`;
#    a span that starts with `--` (a flag named in prose) must be a flag of
#    some command.
# Other programs' flags (bazel, systemctl, kill) and flags in plain prose
# are not checked. A command's flags are the names its --helpfull prints:
# `--NAME (default: ...)`, `(old name, deprecated: --NAME)`,
# `--NAME: same as ...`, plus --help and --helpfull; `--noNAME` negates a
# known NAME.
#
# A self-check first runs the checker on a small document with made-up
# flags and fails the test unless it reports each of them, so a parser
# that silently checks nothing cannot pass; each real document must also
# yield at least MIN_FLAGS checked flags.
set -euo pipefail
bin="$1"
shift
readonly MIN_FLAGS=20
work="${TEST_TMPDIR:-$(mktemp -d)}/docs_flags"
mkdir -p "$work"

# The commands `skipswarm --help` lists, and each one's flags.
"$bin" --help | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' | grep -vx help >"$work/commands"
[ -s "$work/commands" ] || { echo "FAIL: no commands in 'skipswarm --help'"; exit 1; }
: >"$work/flags.*"
while read -r c; do
  "$bin" "$c" --helpfull | sed -n \
    -e 's/^  --\([A-Za-z0-9_]*\) (default:.*/\1/p' \
    -e 's/^      (old name, deprecated: --\([A-Za-z0-9_]*\))$/\1/p' \
    -e 's/^  --\([A-Za-z0-9_]*\): same as --.*/\1/p' >"$work/flags.$c"
  printf 'help\nhelpfull\n' >>"$work/flags.$c"
  [ "$(wc -l <"$work/flags.$c")" -gt 2 ] || { echo "FAIL: no flags in 'skipswarm $c --helpfull'"; exit 1; }
  cat "$work/flags.$c" >>"$work/flags.*"
done <"$work/commands"
printf 'help\nhelpfull\nversion\n' >"$work/flags.-"  # `skipswarm --version`

# Prints "CMD<TAB>FLAG<TAB>LINE" for every flag to check in markdown file
# $1; CMD is a command, "-" (top level) or "*" (any command).
extract() {
  awk -v commands_file="$work/commands" '
    BEGIN { while ((getline c < commands_file) > 0) commands[c] = 1 }
    function unit(text, line, bare,    n, t, i, cmd, tok) {
      n = split(text, t, /[ \t]+/)
      cmd = ""
      for (i = 1; i <= n; i++) {
        tok = t[i]
        if (tok == "") continue
        if (bare && cmd == "" && tok ~ /^--/) cmd = "*"
        bare = 0
        if (tok ~ /^(#|\||\|\||&&|;|>|2>|<)$/) { cmd = ""; continue }
        if (tok ~ /(^|\/)skipswarm$/) {
          cmd = ""
          if (i < n && (t[i + 1] in commands)) { cmd = t[i + 1]; i++ }
          else if (i < n && t[i + 1] ~ /^--/) cmd = "-"
          continue
        }
        if (cmd != "" && match(tok, /^--[A-Za-z][A-Za-z0-9_]*/)) {
          print cmd "\t" substr(tok, 3, RLENGTH - 2) "\t" line
        }
      }
    }
    /^[ \t]*```/ { in_fence = !in_fence; in_span = 0; code = ""; next }
    in_fence {
      if (code == "") code_line = NR
      if ($0 ~ /\\[ \t]*$/) { sub(/\\[ \t]*$/, ""); code = code " " $0; next }
      unit(code " " $0, code_line, 0)
      code = ""
      next
    }
    /^[ \t]*$/ { in_span = 0; next }  # a code span never crosses a paragraph
    {
      n = split($0, parts, "`")
      for (k = 1; k <= n; k++) {
        if (k > 1) {
          if (in_span) { unit(span, span_line, 1); in_span = 0 }
          else { in_span = 1; span = ""; span_line = NR }
        }
        if (in_span) span = span " " parts[k]
      }
    }
  ' "$1"
}

# Checks markdown file $1; prints one line per unknown flag. Exit status:
# 0 when every flag is known; sets CHECKED to the number of flags checked.
check_doc() {
  local doc="$1" bad=0 cmd flag line
  CHECKED=0
  while IFS=$'\t' read -r cmd flag line; do
    CHECKED=$((CHECKED + 1))
    if grep -qxF -- "$flag" "$work/flags.$cmd"; then continue; fi
    if [[ "$flag" == no* ]] && grep -qxF -- "${flag#no}" "$work/flags.$cmd"; then continue; fi
    local where="skipswarm $cmd --helpfull"
    [ "$cmd" = "*" ] && where="any command's --helpfull"
    [ "$cmd" = "-" ] && where="skipswarm --help"
    echo "$doc:$line: --$flag is not in $where"
    bad=1
  done < <(extract "$doc")
  return "$bad"
}

# Self-check: three made-up flags, each in one of the forms above.
cat >"$work/self.md" <<'EOF'
Start with `skipswarm node --name=a --made_up_flag_one=1` and then:

```sh
skipswarm keygen --key_file=k \
    --made_up_flag_two
```

A flag in prose: `--made_up_flag_three`. Not checked: `bazel build --nonsense`.
EOF
set +e
self_out="$(check_doc "$work/self.md")"
set -e
for f in made_up_flag_one made_up_flag_two made_up_flag_three; do
  grep -q -- "--$f is not" <<<"$self_out" || {
    echo "FAIL: the checker missed --$f in its self-check; it printed:"
    echo "$self_out"
    exit 1
  }
done
if grep -q -- "--nonsense\|--name \|--key_file " <<<"$self_out"; then
  echo "FAIL: the self-check reported a flag it should not:"; echo "$self_out"; exit 1
fi
echo "self-check: made-up flags reported (3 of 3)"

status=0
for doc in "$@"; do
  if check_doc "$doc"; then
    echo "$doc: $CHECKED flags, all known to the binary"
  else
    echo "FAIL: $doc names flags the binary does not know (above)"
    status=1
  fi
  if [ "$CHECKED" -lt "$MIN_FLAGS" ]; then
    echo "FAIL: $doc: only $CHECKED flags checked (expected at least $MIN_FLAGS)"
    status=1
  fi
done
exit "$status"
