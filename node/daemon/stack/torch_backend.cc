#include "node/daemon/stack/torch_backend.h"

#include <sstream>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "model/stage_executor.h"
#include "node/compute/output_check.h"
#include "node/daemon/stack/data_source_factory.h"
#include "node/daemon/stack/stage_computes.h"

namespace skipswarm::node {
namespace {

// The sampler borrows the corpus's token stream: the corpus lives as long
// as the source handed out.
class OwningDataSource final : public DataSource {
 public:
  explicit OwningDataSource(DataNodeData data) : data_(std::move(data)) {}
  absl::StatusOr<MicroBatchData> Get(uint64_t index) const override {
    return data_.source->Get(index);
  }

 private:
  DataNodeData data_;
};

}  // namespace

NodeBackend TorchNodeBackend() {
  NodeBackend b;
  b.prepare = [](const NodeDaemonOptions& o) -> absl::StatusOr<std::string> {
    SS_ASSIGN_OR_RETURN(at::Device device, model::ApplyRuntimeOptions(o.model.runtime));
    std::ostringstream name;
    name << device;
    return name.str();
  };
  b.create_compute = &CreateStageCompute;
  b.create_frozen = [](const NodeDaemonOptions& o, const std::vector<int>& hosted,
                       TaskRunner* runner)
      -> absl::StatusOr<std::map<int, std::unique_ptr<StageCompute>>> {
    SS_ASSIGN_OR_RETURN(auto frozen, CreateFrozenStageComputes(o, hosted, runner));
    std::map<int, std::unique_ptr<StageCompute>> out;
    for (auto& [s, c] : frozen) out[s] = std::move(c);
    return out;
  };
  b.create_data = [](const NodeDaemonOptions& o) -> absl::StatusOr<std::unique_ptr<DataSource>> {
    SS_ASSIGN_OR_RETURN(DataNodeData data, CreateDataNodeData(o));
    return std::unique_ptr<DataSource>(std::make_unique<OwningDataSource>(std::move(data)));
  };
  b.output_judge = [](const WireTensor& received, const model::OutputSketch& sketch,
                      const model::SketchCheckOptions& options) {
    return CheckOutputAgainstSketch(received, sketch, options);
  };
  return b;
}

}  // namespace skipswarm::node
