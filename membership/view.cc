#include "membership/view.h"

namespace skipswarm::membership {
namespace {

// FNV-1a, 64 bit: stable across processes and builds, unlike absl::Hash.
class Fnv {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 1099511628211ull;
    }
  }
  void Add(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    Add(b, 8);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 14695981039346656037ull;
};

}  // namespace

std::vector<const MemberInfo*> View::Live() const {
  std::vector<const MemberInfo*> out;
  for (const MemberInfo& m : members) {
    if (m.live()) out.push_back(&m);
  }
  return out;
}

const MemberInfo* View::Find(const common::NodeId& id) const {
  for (const MemberInfo& m : members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

uint64_t View::digest() const {
  Fnv fnv;
  for (const MemberInfo& m : members) {  // sorted by id
    if (!m.live()) continue;
    const std::string id = m.id.Bytes();
    fnv.Add(id.data(), id.size());
    fnv.Add(m.incarnation);
    fnv.Add(m.stages.size());
    for (uint32_t s : m.stages) fnv.Add(s);
  }
  return fnv.value();
}

}  // namespace skipswarm::membership
