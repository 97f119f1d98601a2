#!/usr/bin/env bash
# tools/workspace_status.sh and gen_git_commit.sh (Note [Stamping]).
set -euo pipefail
status_sh="${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/workspace_status.sh"
gen_sh="${TEST_SRCDIR}/${TEST_WORKSPACE}/common/stamp/gen_git_commit.sh"
tmp="${TEST_TMPDIR}"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Outside any git checkout: "unknown".
mkdir -p "${tmp}/nogit"
got=$(cd "${tmp}/nogit" && GIT_CEILING_DIRECTORIES="${tmp}" "${status_sh}")
[[ "${got}" == "STABLE_GIT_COMMIT unknown" ]] || fail "outside git: ${got}"

# A fresh repository: HEAD's short hash; "-dirty" once a tracked file changes.
if command -v git >/dev/null; then
  repo="${tmp}/repo"
  mkdir -p "${repo}"
  (
    cd "${repo}"
    export GIT_CEILING_DIRECTORIES="${tmp}"
    git init -q .
    echo a > f
    git add f
    git -c user.name=t -c user.email=t@t commit -q -m one
    want="STABLE_GIT_COMMIT $(git rev-parse --short HEAD)"
    got=$("${status_sh}")
    [[ "${got}" == "${want}" ]] || fail "clean: ${got} != ${want}"
    echo untracked > g
    got=$("${status_sh}")
    [[ "${got}" == "${want}" ]] || fail "untracked file: ${got} != ${want}"
    echo b > f
    got=$("${status_sh}")
    [[ "${got}" == "${want}-dirty" ]] || fail "dirty: ${got}"
  )
fi

# The generator: the key's value, "unknown" without key or file, and
# nothing but [A-Za-z0-9._-] in the literal.
printf 'BUILD_EMBED_LABEL \nSTABLE_GIT_COMMIT 1a2b3c4-dirty\n' > "${tmp}/status1"
"${gen_sh}" "${tmp}/status1" "${tmp}/out1.cc"
grep -q 'return "1a2b3c4-dirty";' "${tmp}/out1.cc" || fail "key: $(cat "${tmp}/out1.cc")"
printf 'BUILD_EMBED_LABEL \n' > "${tmp}/status2"
"${gen_sh}" "${tmp}/status2" "${tmp}/out2.cc"
grep -q 'return "unknown";' "${tmp}/out2.cc" || fail "no key: $(cat "${tmp}/out2.cc")"
"${gen_sh}" "${tmp}/missing" "${tmp}/out3.cc"
grep -q 'return "unknown";' "${tmp}/out3.cc" || fail "no file: $(cat "${tmp}/out3.cc")"
printf 'STABLE_GIT_COMMIT ab"c\\d\n' > "${tmp}/status4"
"${gen_sh}" "${tmp}/status4" "${tmp}/out4.cc"
grep -q 'return "abcd";' "${tmp}/out4.cc" || fail "quoting: $(cat "${tmp}/out4.cc")"

# .bazelrc: the status command on every build; --stamp only in the release
# config (a default build's actions never see the commit).
rc="${TEST_SRCDIR}/${TEST_WORKSPACE}/.bazelrc"
grep -qx 'build --workspace_status_command=tools/workspace_status.sh' "${rc}" ||
  fail ".bazelrc: no workspace status command"
grep -qx 'build:release --stamp' "${rc}" || fail ".bazelrc: the release config does not stamp"
if grep -E '^(build|common|test)(:[a-z_]+)? .*--stamp' "${rc}" | grep -vqx 'build:release --stamp'; then
  fail ".bazelrc: --stamp outside the release config: $(grep -n -- '--stamp' "${rc}")"
fi
echo PASS
