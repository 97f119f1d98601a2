#include "model/checkpoint_tensors.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace skipswarm::model {
namespace {

absl::Status Loss(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("checkpoint state: ", what));
}

template <typename T>
void PutLE(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
  }
}

// Reads from the front of `rest`, refusing to read past its end.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  size_t left() const { return rest_.size(); }

  template <typename T>
  bool Read(T* v) {
    if (rest_.size() < sizeof(T)) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      x |= uint64_t{static_cast<unsigned char>(rest_[i])} << (8 * i);
    }
    *v = static_cast<T>(x);
    rest_.remove_prefix(sizeof(T));
    return true;
  }
  bool Take(uint64_t n, absl::string_view* out) {
    if (n > rest_.size()) return false;
    *out = rest_.substr(0, static_cast<size_t>(n));
    rest_.remove_prefix(static_cast<size_t>(n));
    return true;
  }

 private:
  absl::string_view rest_;
};

// The element count of `dims`, or false when a dim is negative or the
// count (or its byte size) overflows uint64.
bool ByteSize(const std::vector<int64_t>& dims, size_t elem, uint64_t* bytes) {
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return false;
    const uint64_t u = static_cast<uint64_t>(d);
    if (u != 0 && n > UINT64_MAX / u) return false;
    n *= u;
  }
  if (elem != 0 && n > UINT64_MAX / elem) return false;
  *bytes = n * elem;
  return true;
}

}  // namespace

size_t TensorDtypeSize(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::kFloat32: return 4;
    case TensorDtype::kFloat64: return 8;
    case TensorDtype::kFloat16: return 2;
    case TensorDtype::kBFloat16: return 2;
    case TensorDtype::kInt64: return 8;
    case TensorDtype::kUInt8: return 1;
  }
  return 0;
}

void AppendTensorCount(std::string& out, uint32_t count) { PutLE<uint32_t>(out, count); }

size_t TensorEntrySize(size_t name_len, size_t rank, size_t data_bytes) {
  return sizeof(uint16_t) + name_len + 2 * sizeof(uint8_t) + rank * sizeof(uint64_t) +
         sizeof(uint64_t) + data_bytes;
}

void AppendTensorEntry(std::string& out, absl::string_view name, TensorDtype dtype,
                       const std::vector<int64_t>& dims, absl::string_view data) {
  CHECK(!name.empty() && name.size() <= kMaxTensorNameLen) << name;
  CHECK_LE(dims.size(), static_cast<size_t>(kMaxTensorRank)) << name;
  uint64_t bytes = 0;
  CHECK(ByteSize(dims, TensorDtypeSize(dtype), &bytes) && bytes == data.size()) << name;
  PutLE<uint16_t>(out, static_cast<uint16_t>(name.size()));
  out.append(name.data(), name.size());
  PutLE<uint8_t>(out, static_cast<uint8_t>(dtype));
  PutLE<uint8_t>(out, static_cast<uint8_t>(dims.size()));
  for (int64_t d : dims) PutLE<uint64_t>(out, static_cast<uint64_t>(d));
  PutLE<uint64_t>(out, data.size());
  out.append(data.data(), data.size());
}

absl::StatusOr<std::vector<TensorEntry>> ParseTensorList(absl::string_view bytes) {
  Reader r(bytes);
  uint32_t count = 0;
  if (!r.Read(&count)) return Loss("too short for its entry count");
  // The smallest entry: a 1-byte name, dtype, rank 0, byte_len, 1 byte.
  constexpr size_t kMinEntry = 2 + 1 + 1 + 1 + 8 + 1;
  if (count > r.left() / kMinEntry) {
    return Loss(absl::StrCat(count, " entries cannot fit in ", r.left(), " bytes"));
  }
  std::vector<TensorEntry> entries;
  entries.reserve(count);
  std::set<absl::string_view> names;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string at = absl::StrCat("entry ", i, ": ");
    uint16_t name_len = 0;
    absl::string_view name;
    if (!r.Read(&name_len) || name_len == 0 || name_len > kMaxTensorNameLen ||
        !r.Take(name_len, &name)) {
      return Loss(absl::StrCat(at, "bad name length ", name_len));
    }
    if (!names.insert(name).second) return Loss(absl::StrCat(at, "duplicate name ", name));
    TensorEntry e;
    e.name = std::string(name);
    uint8_t dtype = 0, rank = 0;
    if (!r.Read(&dtype) || !r.Read(&rank)) return Loss(absl::StrCat(at, e.name, " is cut off"));
    e.dtype = static_cast<TensorDtype>(dtype);
    const size_t elem = TensorDtypeSize(e.dtype);
    if (elem == 0) return Loss(absl::StrCat(at, e.name, " has unknown dtype ", int{dtype}));
    if (rank > kMaxTensorRank) return Loss(absl::StrCat(at, e.name, " has rank ", int{rank}));
    e.dims.resize(rank);
    for (int64_t& d : e.dims) {
      uint64_t u = 0;
      if (!r.Read(&u)) return Loss(absl::StrCat(at, e.name, " is cut off"));
      d = static_cast<int64_t>(u);
    }
    uint64_t expected = 0, byte_len = 0;
    if (!ByteSize(e.dims, elem, &expected)) {
      return Loss(absl::StrCat(at, e.name, " has bad or overflowing dims"));
    }
    if (!r.Read(&byte_len) || byte_len != expected || !r.Take(byte_len, &e.data)) {
      return Loss(absl::StrCat(at, e.name, " holds ", byte_len, " bytes, its shape needs ",
                               expected, " (", r.left(), " left)"));
    }
    entries.push_back(std::move(e));
  }
  if (r.left() != 0) return Loss(absl::StrCat(r.left(), " bytes after the last entry"));
  return entries;
}

}  // namespace skipswarm::model
