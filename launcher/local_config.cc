#include "launcher/local_config.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/free_port.h"
#include "common/status_macros.h"
#include "identity/identity.h"
#include "nlohmann/json.hpp"
#include "node/daemon/stack/swarm_spec.h"

namespace skipswarm::launcher {
namespace {

std::string JsonString(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

std::string LocalSwarmName(uint64_t random) {
  return absl::StrCat("local-", absl::Hex(random, absl::kZeroPad16));
}

absl::Status AssignLocalAddresses(const LocalLayout& layout, LocalConfigOptions* o) {
  if (layout.empty()) return absl::InvalidArgumentError("the layout has no node");
  if (o->tls) {
    std::error_code ec;
    std::filesystem::create_directories(o->dir + "/keys", ec);
    if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", o->dir, "/keys"));
  }
  if (o->gossip) {
    // Gossip: every node's one address (Note [One port]), so that the
    // launcher can ask live nodes for checkpoint copies (peer_copies.h).
    SS_ASSIGN_OR_RETURN(int port, common::FreeLoopbackPort());
    o->bootstrap = absl::StrCat("127.0.0.1:", port);
    for (const auto& [name, st] : layout) {
      if (name == layout.front().first) {
        o->addresses[name] = o->bootstrap;
        continue;
      }
      SS_ASSIGN_OR_RETURN(int p, common::FreeLoopbackPort());
      o->addresses[name] = absl::StrCat("127.0.0.1:", p);
    }
    return absl::OkStatus();
  }
  std::vector<std::string> entries;
  for (const auto& [name, st] : layout) {
    SS_ASSIGN_OR_RETURN(int p1, common::FreeLoopbackPort());
    SS_ASSIGN_OR_RETURN(int p2, common::FreeLoopbackPort());
    // Note [Static swarm security]: with TLS every entry pins its node's
    // id, so the keys exist before any node starts.
    std::string id_hex;
    if (o->tls) {
      SS_ASSIGN_OR_RETURN(auto identity,
                          identity::Identity::LoadOrCreate(o->dir + "/keys/" + name + ".key"));
      id_hex = identity->id().Hex();
    }
    const bool sdp = o->sdp != model::SdpMode::kOff && o->sdp_nodes.count(name) > 0;
    entries.push_back(node::FormatSwarmEntry(name, st, absl::StrCat("127.0.0.1:", p1),
                                             absl::StrCat("127.0.0.1:", p2), id_hex, sdp));
  }
  o->swarm = absl::StrJoin(entries, ",");
  return absl::OkStatus();
}

std::string LocalConfigs::Membership(const std::string& name, const std::vector<int>& st,
                                     bool joiner) const {
  const std::string key_file = o_.dir + "/keys/" + name + ".key";
  if (!o_.gossip) {
    return absl::StrCat("\"swarm\": ", JsonString(o_.swarm), ",\n  ",
                        o_.tls ? absl::StrCat("\"node_key_file\": ", JsonString(key_file))
                               : "\"insecure\": true");
  }
  std::string c = absl::StrCat(
      o_.tls ? absl::StrCat("\"node_key_file\": ", JsonString(key_file), ",\n  \"create_key\": true")
             : "\"insecure\": true",
      ",\n  \"control_port\": -1");
  if (o_.rebalance_every > 0) {
    absl::StrAppend(&c, ",\n  \"rebalance_every\": ", o_.rebalance_every);
  }
  if (!st.empty()) {
    absl::StrAppend(&c, ",\n  \"host_stages\": ", JsonString(model::FormatStageSet(st)));
    if (!joiner) absl::StrAppend(&c, ",\n  \"expect_members\": ", o_.expect_members);
  } else {
    absl::StrAppend(&c, ",\n  \"join_report\": ", JsonString(o_.dir + "/join.jsonl"));
  }
  if (name != o_.founder) absl::StrAppend(&c, ",\n  \"join\": ", JsonString(o_.bootstrap));
  if (!o_.swarm_name.empty()) {
    absl::StrAppend(&c, ",\n  \"swarm_name\": ", JsonString(o_.swarm_name));
  }
  auto a = o_.addresses.find(name);
  if (a != o_.addresses.end()) absl::StrAppend(&c, ",\n  \"listen\": ", JsonString(a->second));
  absl::StrAppend(&c, ",\n  \"checkpoint_copies\": ", o_.checkpoint_copies);
  return c;
}

std::string LocalConfigs::Write(const std::string& name, const std::vector<int>& st,
                                bool joiner) const {
  const std::string config = absl::StrCat(o_.dir, "/", name, ".json");
  const bool sdp = o_.sdp != model::SdpMode::kOff && o_.sdp_nodes.count(name) > 0;
  auto extra = o_.extra_config.find(name);
  std::ofstream out(config);
  out << "{\n  \"name\": " << JsonString(name) << ",\n  "
      << Membership(name, st, joiner || st.empty())
      << ",\n  \"node_iterations\": " << o_.iterations << ",\n  \"node_mbs\": " << o_.mbs
      << ",\n  \"memory_slots\": " << (sdp ? o_.sdp_memory_slots : o_.memory_slots)
      << (sdp ? absl::StrCat(",\n  \"sdp\": ", JsonString(model::SdpModeName(o_.sdp))) : "")
      << ",\n  \"checkpoint_dir\": " << JsonString(o_.dir + "/checkpoints")
      << ",\n  \"node_planner\": " << JsonString(o_.planner)
      << ",\n  \"node_path_length\": " << o_.path_length
      << ",\n  \"node_planner_link_costs\": " << (o_.planner_link_costs ? "true" : "false")
      << ",\n  \"threads\": 1"
      // Every node: relays add their own re-routes (iteration_report.h).
      << ",\n  \"progress_file\": " << JsonString(o_.progress_file)
      << (o_.record_routes && !st.empty() && st[0] == 0
              ? absl::StrCat(",\n  \"node_record_routes\": ",
                             JsonString(absl::StrCat(o_.dir, "/routes/", name, ".routes")))
              : "")
      << (o_.checkpoint_every > 0
              ? absl::StrCat(",\n  \"node_checkpoint_every\": ", o_.checkpoint_every)
              : "")
      << ",\n  " << absl::StrJoin(o_.model_settings, ",\n  ")
      << (extra == o_.extra_config.end() || extra->second.empty() ? "" : ",\n  " + extra->second)
      << "\n}\n";
  return config;
}

}  // namespace skipswarm::launcher
