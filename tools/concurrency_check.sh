#!/usr/bin/env bash
# The concurrency checks (clang), a CI command of its own beside .ci/run
# (README: why separate):
#   1. clang's thread-safety analysis as errors over the whole tree
#      (--config=tsa: every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED
#      is checked; GCC ignores them), every compile action run syntax-only
#      (tools/thread_safety_check.sh, Note [Thread-safety check]);
#   2. ThreadSanitizer (--config=tsan) over the tests that run threads:
#      absl::Status's count (status_count_test), clock and lifetime guard,
#      the metrics / status page HTTP server,
#      a gossip daemon's hosted-stages snapshot,
#      in-process / shaping / fault transports, stage server, trainer and
#      data driver, the in-process timed swarm and the exactness swarm, and
#      the real-gRPC transport, node server, replica-group TLS and gossip
#      tests (gRPC's hand-offs annotated: third_party/tsan/grpc_annotations.cc).
#      Suppressions (only for uninstrumented system libraries, each with its
#      reason): third_party/tsan/suppressions.cc.
#
#   3. the in-process daemon tests (whole stacks over real gRPC, libtorch)
#      under TSan, judged on reports alone: 0 reports and no crash (an
#      `ERROR: ThreadSanitizer` line) in each test log,
#      whether or not the test met its real-time waits (TSan's slowdown
#      on a loaded machine can stall a swarm whose hops and probes run on
#      real deadlines; the outcome is printed, not judged).
#
#   bash tools/concurrency_check.sh [extra bazel test flags]
#   bash tools/concurrency_check.sh --list     # the TSan test targets
#   bash tools/concurrency_check.sh --grpc     # the gRPC tests
#   bash tools/concurrency_check.sh --daemons  # step 3 alone
#   bash tools/concurrency_check.sh --ci       # CI's subset (.ci/run)
#
# --ci: the subset CI runs (its cold cost and why these: README.md,
# "Concurrency checks"): first the race canary, which must fail with a
# report (third_party/tsan/race_canary.cc: proves the build reports), then
# the concurrent core (absl::Status's count, clock and lifetime guard,
# in-process and real-gRPC transport, stage server, trainer and data
# driver, the replica group over gRPC) judged as tests (a report fails its
# test: TSan's exit code), then one daemon swarm judged on its reports
# (step 3's rule), less the open races listed in
# third_party/tsan/known_races.txt. Exits non-zero on any other report or
# failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# Report-free under TSan (keep them so).
TSAN_TESTS=(
  //third_party/tsan:status_count_test
  //common:lifetime_guard_test
  //common:real_clock_test
  //node/daemon/reporting:daemon_reporting_test
  //node/daemon/reporting:metrics_test
  //node/daemon/reporting:status_page_test
  //node/daemon/gossip:hosted_stages_test
  //node/daemon/gossip:gpu_contention_test
  //node/transport:inproc_transport_test
  //node/transport:fault_transport_test
  //node/transport:shaping_transport_test
  //node/stage:stage_server_test
  //node/train:data_node_driver_teardown_test
  //node/train:node_trainer_test
  //node/train:timed_swarm_test
  //tests/integration:exactness_test
  //node/transport:node_server_test
  //node/transport:grpc_transport_test
  //node/transport:grpc_transport_tls_test
  //node/train:grpc_group_test
  //node/train:grpc_group_deadline_test
  //node/train:grpc_group_tls_test
  //membership:grpc_gossip_test
  //membership:membership_shutdown_test
)
# The in-process daemons, judged on their logs' reports only (step 3).
# Report-free; open races CI's step does not judge are listed in
# third_party/tsan/known_races.txt (none now; third_party/tsan/README.md).
TSAN_DAEMON_TESTS=(
  //tests/integration:gossip_daemon_test
  //tests/integration:gossip_daemon_stop_test
  //tests/integration:relayed_member_test
  //tests/adversarial:forged_frames_test
  //tests/integration:signed_frames_daemon_test
  //tests/integration:open_swarm_daemon_test
  //tests/integration:peer_copy_restore_test
  //tests/integration:sdp_auto_join_test
  //tests/integration:admission_daemon_test
  //tests/integration:join_retry_test
  //tests/integration:restart_behind_test
)
# CI's subset of the two sets above (--ci).
TSAN_CI_TESTS=(
  //third_party/tsan:status_count_test
  //common:lifetime_guard_test
  //common:real_clock_test
  //node/transport:inproc_transport_test
  //node/transport:grpc_transport_test
  //node/stage:stage_server_test
  //node/train:node_trainer_test
  //node/train:data_node_driver_teardown_test
  //node/train:grpc_group_test
)
TSAN_CI_DAEMON_TESTS=(
  //tests/integration:gossip_daemon_stop_test
)
# The tests that run real gRPC (Note [TSan and gRPC] in
# third_party/tsan/README.md). All report nothing. Run them with
#   bash tools/concurrency_check.sh --grpc
TSAN_GRPC_TESTS=(
  //node/transport:node_server_test
  //node/transport:grpc_transport_test
  //node/transport:grpc_transport_tls_test
  //node/train:grpc_group_test
  //node/train:grpc_group_deadline_test
  //node/train:grpc_group_tls_test
  //membership:grpc_gossip_test
)

# Step 3: runs the daemon tests in DAEMONS and counts the reports in their
# logs.
DAEMONS=("${TSAN_DAEMON_TESTS[@]}")
daemon_reports() {
  # Built first: a target that fails to build under TSan would otherwise be
  # judged on an older log (a default build writes the same testlogs path).
  if ! bazel build --config=tsan --keep_going "$@" "${DAEMONS[@]}"; then
    echo "${DAEMONS[*]}: did not build under TSan"
    return 1
  fi
  bazel test --config=tsan --keep_going "$@" "${DAEMONS[@]}" || true
  local testlogs target log reports crashes outcome bad=0
  testlogs="$(bazel info --config=tsan bazel-testlogs)"
  for target in "${DAEMONS[@]}"; do
    log="$testlogs/${target#//}"
    log="${log/://}/test.log"
    if [ ! -f "$log" ]; then
      echo "$target: no test log (did it build?)"
      bad=1
      continue
    fi
    reports=$(grep -c 'WARNING: ThreadSanitizer' "$log" || true)
    # A crash (SEGV, abort) is TSan's "ERROR:" line, not a report; judged
    # too: it is no time-out.
    crashes=$(grep -c 'ERROR: ThreadSanitizer' "$log" || true)
    outcome=$(grep -qE '^\[  PASSED  \]' "$log" && ! grep -q '^\[  FAILED  \]' "$log" &&
              echo "its cases passed" || echo "its cases did not all pass in time")
    [ "$crashes" -eq 0 ] || outcome="it CRASHED (an 'ERROR: ThreadSanitizer' line)"
    echo "$target: $reports TSan report(s); $outcome"
    [ "$reports" -eq 0 ] && [ "$crashes" -eq 0 ] || bad=1
  done
  return "$bad"
}

# The race canary must fail under TSan, and with a report: otherwise a
# clean run proves nothing.
race_canary() {
  local target=//third_party/tsan:race_canary_test log
  if bazel test --config=tsan --test_output=summary "$@" "$target"; then
    echo "$target passed under TSan: the build does not report races; nothing it checks counts"
    return 1
  fi
  log="$(bazel info --config=tsan bazel-testlogs)/third_party/tsan/race_canary_test/test.log"
  if ! grep -q 'WARNING: ThreadSanitizer: data race' "$log" 2>/dev/null; then
    echo "$target failed without a TSan report (did it build?)"
    return 1
  fi
  echo "$target: TSan reported its race and failed it, as it must (the FAILED line above is expected)"
}

ci_subset() {
  local bad=0
  race_canary "$@" || bad=1
  bazel test --config=tsan --keep_going "$@" "${TSAN_CI_TESTS[@]}" || bad=1
  DAEMONS=("${TSAN_CI_DAEMON_TESTS[@]}")
  daemon_reports "$@" --test_env=TSAN_OPTIONS="suppressions=$PWD/third_party/tsan/known_races.txt" ||
    bad=1
  [ "$bad" -eq 0 ] && echo "TSan subset: 0 reports, every test passed" ||
    echo "TSan subset: FAILED (a report, a failed test, or a canary that passed)"
  return "$bad"
}

case "${1:-}" in
  --list) printf '%s\n' "${TSAN_TESTS[@]}" "${TSAN_DAEMON_TESTS[@]}"; exit 0 ;;
  --grpc) shift; exec bazel test --config=tsan --keep_going "$@" "${TSAN_GRPC_TESTS[@]}" ;;
  --daemons) shift; daemon_reports "$@"; exit ;;
  --ci) shift; ci_subset "$@"; exit ;;
esac

bash tools/thread_safety_check.sh
bazel test --config=tsan "$@" "${TSAN_TESTS[@]}"
daemon_reports "$@"
