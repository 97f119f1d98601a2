// The system headers most of our non-torch translation units parse (the C++
// library, Abseil, glog, protobuf's runtime, nlohmann-json), compiled once
// per build into a GCC precompiled header (third_party:common_pch; tests
// get third_party:test_pch, the same list plus GoogleTest, built at the
// tests' -O1). Targets without `torch = True` start from it in opt builds
// (bazel/defs.bzl); what it saves per TU is in third_party/README.md.
//
// Contract: only system headers here, never our own (a change to one of
// ours would rebuild everything). Every TU must still include what it uses:
// dbg and asan builds do not use the precompiled header, so a missing
// include fails there (`bazel test --config=asan //...`). GCC uses the .gch
// only when the compile's flags match the ones it was built with
// (bazel/defs.bzl PCH_FLAGS); otherwise it silently parses this header:
// slower, never wrong.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/functional/any_invocable.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/cord.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>
#include <glog/logging.h>
#include <google/protobuf/arena.h>
#include <google/protobuf/generated_message_reflection.h>
#include <google/protobuf/message.h>
#include <google/protobuf/repeated_field.h>
#include <nlohmann/json.hpp>
