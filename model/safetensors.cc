#include "model/safetensors.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "nlohmann/json.hpp"

namespace skipswarm::model {
namespace {

int64_t DtypeSize(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "I64") return 8;
  if (dtype == "BF16" || dtype == "F16") return 2;
  return 0;
}

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

absl::StatusOr<std::string> SafetensorsHeader(const std::vector<SafetensorsTensor>& tensors,
                                              const std::map<std::string, std::string>& metadata) {
  // nlohmann's ordered_json keeps insertion order, so the header lists the
  // tensors in data order (readers do not need it, people do).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  int64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    const int64_t elem = DtypeSize(t.dtype);
    if (elem == 0) return absl::InvalidArgumentError(absl::StrCat("bad dtype ", t.dtype));
    if (t.name == "__metadata__" || !seen.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor name '", t.name, "' repeats"));
    }
    const int64_t bytes = elem * Elements(t.shape);
    if (bytes != static_cast<int64_t>(t.data.size())) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has ",
                                                     t.data.size(), " bytes, its shape needs ",
                                                     bytes));
    }
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  PutU64(&out, json.size());
  out += json;
  return out;
}

absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  absl::StatusOr<std::string> header = SafetensorsHeader(tensors, metadata);
  if (!header.ok()) return header.status();
  std::vector<absl::string_view> pieces = {*header};
  for (const SafetensorsTensor& t : tensors) pieces.push_back(t.data);
  return common::WriteFileAtomically(path, pieces);
}

absl::StatusOr<SafetensorsIndex> ReadSafetensorsIndex(absl::string_view file) {
  if (file.size() < 8) return absl::DataLossError("safetensors: shorter than 8 bytes");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= uint64_t{static_cast<unsigned char>(file[i])} << (8 * i);
  if (len > file.size() - 8) return absl::DataLossError("safetensors: header past the end");
  nlohmann::json j = nlohmann::json::parse(file.substr(8, len), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError("safetensors: header is not a JSON object");
  }
  SafetensorsIndex index;
  index.data_start = 8 + static_cast<int64_t>(len);
  const int64_t data_size = static_cast<int64_t>(file.size()) - index.data_start;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  try {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "__metadata__") {
        for (auto m = it->begin(); m != it->end(); ++m) {
          index.metadata[m.key()] = m->get<std::string>();
        }
        continue;
      }
      SafetensorsEntry e;
      e.dtype = (*it)["dtype"].get<std::string>();
      e.shape = (*it)["shape"].get<std::vector<int64_t>>();
      e.begin = (*it)["data_offsets"][0].get<int64_t>();
      e.end = (*it)["data_offsets"][1].get<int64_t>();
      if (DtypeSize(e.dtype) == 0 || e.begin < 0 || e.end > data_size ||
          e.end - e.begin != DtypeSize(e.dtype) * Elements(e.shape)) {
        return absl::DataLossError(absl::StrCat("safetensors: bad entry '", it.key(), "'"));
      }
      ranges.emplace_back(e.begin, e.end);
      index.tensors[it.key()] = std::move(e);
    }
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("safetensors: malformed header: ", e.what()));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return absl::DataLossError("safetensors: tensors overlap");
    }
  }
  return index;
}

}  // namespace skipswarm::model
