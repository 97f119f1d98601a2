// The production GpuProcessLister (gpu_contention.h): `nvidia-smi
// --id=GPU --query-compute-apps=pid,used_memory --format=csv,noheader,nounits`
// run as a child process with a timeout.
//
//   SS_ASSIGN_OR_RETURN(std::string gpu, NvidiaSmiGpuId("cuda:1", getenv("CUDA_VISIBLE_DEVICES")));
//   auto lister = std::make_unique<NvidiaSmiLister>(gpu, absl::Seconds(5));
//
// Why nvidia-smi rather than NVML: it needs nothing at build time (no
// nvml.h, no libnvidia-ml to link), so CPU builds and CPU machines are
// unchanged and the same binary works on both; it ships with every NVIDIA
// driver that can run our CUDA build; its output is one line per process,
// parsed (and tested) here; a hung driver is caught by the timeout instead
// of hanging a thread inside a library call. The cost is one short child
// process per poll (every few seconds).
//
// Thread rule: NvidiaSmiLister is thread-compatible; the functions are pure.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_NVIDIA_SMI_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_NVIDIA_SMI_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "node/daemon/gossip/gpu_contention.h"

namespace skipswarm::node {

// The lines of `--query-compute-apps=pid,used_memory --format=csv,noheader,
// nounits` ("4242, 2048": MiB); a memory of "[N/A]" or "[Not Supported]"
// is unknown (-1). No lines, or "No running processes found": none.
// InvalidArgument quoting the first line that is neither.
absl::StatusOr<std::vector<GpuProcess>> ParseNvidiaSmiComputeApps(absl::string_view csv);

// nvidia-smi's --id for our device: "cuda" is CUDA device 0, "cuda:N"
// device N. CUDA numbers the devices that CUDA_VISIBLE_DEVICES lists (an
// index, a GPU UUID or a PCI bus id each, all of which --id takes); unset
// or empty (`cuda_visible_devices` null or ""), they are nvidia-smi's own
// indices. InvalidArgument for a device that is not a CUDA one or an
// index past the list.
absl::StatusOr<std::string> NvidiaSmiGpuId(absl::string_view device,
                                           const char* cuda_visible_devices);

class NvidiaSmiLister final : public GpuProcessLister {
 public:
  // `program`: the nvidia-smi to run (PATH lookup); tests pass a script.
  NvidiaSmiLister(std::string gpu_id, absl::Duration timeout,
                  std::string program = "nvidia-smi")
      : gpu_id_(std::move(gpu_id)), timeout_(timeout), program_(std::move(program)) {}

  absl::StatusOr<std::vector<GpuProcess>> List() override;
  std::string Describe() const override;

 private:
  const std::string gpu_id_;
  const absl::Duration timeout_;
  const std::string program_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_NVIDIA_SMI_H_
