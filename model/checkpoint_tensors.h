// The state section of a version-2 stage checkpoint (model/checkpoint.h):
// a list of named raw tensors in a layout of our own, parsed here without
// libtorch, so bytes from a hostile peer never reach libtorch's archive
// (TorchScript) loader. Torch-free: model/checkpoint.cc maps the dtypes.
//
//   std::string state;
//   AppendTensorEntry(state, "param/w", TensorDtype::kFloat32, {2, 3}, bytes);
//   SS_ASSIGN_OR_RETURN(std::vector<TensorEntry> entries, ParseTensorList(state));
//
// Layout (little-endian): u32 entry count, then per entry
//   u16 name_len | name | u8 dtype | u8 rank | rank x i64 dim | u64 byte_len | bytes
// ParseTensorList checks every length against what is left of the input
// before reading it (no allocation larger than the input; sizes multiplied
// with overflow checks): names 1..kMaxTensorNameLen bytes and unique, a
// known dtype, rank <= kMaxTensorRank, dims >= 0, byte_len equal to the
// element count times the dtype's size, and no bytes after the last entry.
// Anything else is DataLoss. A rank-0 entry is a scalar (one element).
//
// Thread rule: free functions, no shared state.
#ifndef SKIPSWARM_MODEL_CHECKPOINT_TENSORS_H_
#define SKIPSWARM_MODEL_CHECKPOINT_TENSORS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::model {

// The dtypes a checkpoint stores. The values are the format's: never
// renumber one.
enum class TensorDtype : uint8_t {
  kFloat32 = 1,
  kFloat64 = 2,
  kFloat16 = 3,
  kBFloat16 = 4,
  kInt64 = 5,
  kUInt8 = 6,
};
constexpr int kMaxTensorRank = 8;
constexpr size_t kMaxTensorNameLen = 1024;

// Bytes per element; 0 for a value that is not a TensorDtype.
size_t TensorDtypeSize(TensorDtype dtype);

struct TensorEntry {
  std::string name;
  TensorDtype dtype = TensorDtype::kFloat32;
  std::vector<int64_t> dims;
  absl::string_view data;  // borrows the parsed input; element bytes, little-endian
};

// Appends one entry. REQUIRES: a name of 1..kMaxTensorNameLen bytes, rank <=
// kMaxTensorRank, data.size() == element count x TensorDtypeSize(dtype)
// (our own invariants: CHECKed).
void AppendTensorEntry(std::string& out, absl::string_view name, TensorDtype dtype,
                       const std::vector<int64_t>& dims, absl::string_view data);
// The u32 count that opens the list, written before its entries.
void AppendTensorCount(std::string& out, uint32_t count);
// The bytes AppendTensorEntry appends for an entry of this name length,
// rank and data size (so a writer can reserve the whole list at once).
size_t TensorEntrySize(size_t name_len, size_t rank, size_t data_bytes);

// The entries of `bytes`, in order; each entry's data borrows `bytes`.
absl::StatusOr<std::vector<TensorEntry>> ParseTensorList(absl::string_view bytes);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CHECKPOINT_TENSORS_H_
