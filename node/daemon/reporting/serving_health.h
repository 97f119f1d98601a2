// ServingHealth: why a daemon is not serving. Causes ("paused": the data
// node cannot plan, Note [Paused training]; "diverged": its last loss was
// not finite; "isolated": its gossip view holds no live peer) are set and
// cleared independently; the node is SERVING when
// none is set. Each change goes to the gRPC health service (through
// `set_serving`), to /metrics (skipswarm_serving, and
// skipswarm_health_cause{cause="..."} 1 while a cause holds) and to the log
// with its reason.
//
//   ServingHealth health("n1", [t](bool s) { t->SetServing(s); }, &metrics);
//   health.Set("paused", absl::UnavailableError("stage 2 has no replica"));
//   health.ObserveIteration(report);   // "diverged" on a non-finite loss
//
// Thread rule: thread-safe. `set_serving` runs outside the lock, on the
// caller's thread; callers that change causes concurrently may see the
// health service lag by one change, never stay wrong (the last caller's
// call carries the state as of its change).
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_SERVING_HEALTH_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_SERVING_HEALTH_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "node/daemon/reporting/metrics.h"
#include "node/train/node_trainer.h"

namespace skipswarm::node {

class ServingHealth {
 public:
  // `metrics` is borrowed and must outlive this object.
  ServingHealth(std::string node_name, absl::AnyInvocable<void(bool)> set_serving,
                Metrics* metrics);

  // Sets cause `cause` to `why` (OK clears it).
  void Set(const std::string& cause, const absl::Status& why);
  // A data node's report: "diverged" while its loss is not finite (an
  // iteration in which no micro-batch finished changes nothing).
  void ObserveIteration(const NodeIterationReport& r);
  // A gossip node's view: "isolated" while it holds no live member other
  // than this node (a founder before anyone joined, or one cut off).
  void ObservePeers(size_t live_peers);

  bool serving() const;
  // "diverged: loss nan at iteration 12; paused: ..." (empty when serving).
  std::string Reasons() const;

 private:
  const std::string node_name_;
  absl::AnyInvocable<void(bool)> set_serving_;
  Metrics* const metrics_;
  mutable absl::Mutex mu_;
  std::map<std::string, absl::Status> causes_ ABSL_GUARDED_BY(mu_);  // not OK ones only
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_SERVING_HEALTH_H_
