#!/usr/bin/env bash
# The concurrency checks (clang), a CI command of its own beside .ci/run
# (README: why separate):
#   1. clang's thread-safety analysis as errors over the whole tree
#      (--config=tsa: every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED
#      is checked; GCC ignores them), every compile action run syntax-only
#      (tools/thread_safety_check.sh, Note [Thread-safety check]);
#   2. ThreadSanitizer (--config=tsan) over the tests that run threads:
#      clock and lifetime guard, the metrics / status page HTTP server,
#      a gossip daemon's hosted-stages snapshot,
#      in-process / shaping / fault transports, stage server, trainer and
#      data driver, the in-process timed swarm and the exactness swarm, and
#      the real-gRPC transport, node server, replica-group TLS and gossip
#      tests (gRPC's hand-offs annotated: third_party/tsan/grpc_annotations.cc).
#      Suppressions (only for uninstrumented system libraries, each with its
#      reason): third_party/tsan/suppressions.cc.
#
#   bash tools/concurrency_check.sh [extra bazel test flags]
#   bash tools/concurrency_check.sh --list    # the TSan test targets
#   bash tools/concurrency_check.sh --grpc    # the gRPC tests
set -euo pipefail
cd "$(dirname "$0")/.."

# Report-free under TSan (keep them so).
TSAN_TESTS=(
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
  //node/train:grpc_group_tls_test
  //membership:grpc_gossip_test
)
# The tests that run real gRPC (Note [TSan and gRPC] in
# third_party/tsan/README.md). All report nothing; grpc_group_test is not
# in the set above because some of its cases run on real-time deadlines
# that TSan's slowdown on a loaded machine misses. Run them with
#   bash tools/concurrency_check.sh --grpc
TSAN_GRPC_TESTS=(
  //node/transport:node_server_test
  //node/transport:grpc_transport_test
  //node/transport:grpc_transport_tls_test
  //node/train:grpc_group_test
  //node/train:grpc_group_tls_test
  //membership:grpc_gossip_test
)

case "${1:-}" in
  --list) printf '%s\n' "${TSAN_TESTS[@]}"; exit 0 ;;
  --grpc) shift; exec bazel test --config=tsan --keep_going "$@" "${TSAN_GRPC_TESTS[@]}" ;;
esac

bash tools/thread_safety_check.sh
exec bazel test --config=tsan "$@" "${TSAN_TESTS[@]}"
