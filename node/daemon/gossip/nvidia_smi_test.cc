#include "node/daemon/gossip/nvidia_smi.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(NvidiaSmiTest, ParsesComputeApps) {
  absl::StatusOr<std::vector<GpuProcess>> p =
      ParseNvidiaSmiComputeApps("4242, 2048\n  77, [N/A]\n9, [Not Supported]\n\n");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[0].pid, 4242);
  EXPECT_EQ((*p)[0].used_bytes, 2048 * kMiB);
  EXPECT_EQ((*p)[1].pid, 77);
  EXPECT_EQ((*p)[1].used_bytes, -1);
  EXPECT_EQ((*p)[2].used_bytes, -1);
  EXPECT_TRUE(ParseNvidiaSmiComputeApps("").value().empty());
  EXPECT_TRUE(ParseNvidiaSmiComputeApps("No running processes found\n").value().empty());
}

TEST(NvidiaSmiTest, RefusesOutputItDoesNotUnderstand) {
  for (const char* bad : {"pid, used_gpu_memory [MiB]\n", "4242\n", "-1, 5\n", "12, lots\n",
                          "NVIDIA-SMI has failed because it couldn't communicate\n"}) {
    absl::StatusOr<std::vector<GpuProcess>> p = ParseNvidiaSmiComputeApps(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("unexpected nvidia-smi output line"), std::string::npos)
        << p.status();
  }
}

TEST(NvidiaSmiTest, GpuIdFollowsTheDeviceAndCudaVisibleDevices) {
  EXPECT_EQ(NvidiaSmiGpuId("cuda", nullptr).value(), "0");
  EXPECT_EQ(NvidiaSmiGpuId("cuda:3", "").value(), "3");
  EXPECT_EQ(NvidiaSmiGpuId("cuda:1", "2,5").value(), "5");
  EXPECT_EQ(NvidiaSmiGpuId("cuda", "GPU-8f6a1c2e-aaaa").value(), "GPU-8f6a1c2e-aaaa");
  absl::StatusOr<std::string> past = NvidiaSmiGpuId("cuda:2", "0,1");
  EXPECT_NE(past.status().message().find("CUDA device 2 is not in CUDA_VISIBLE_DEVICES='0,1'"),
            std::string::npos)
      << past.status();
  for (const char* d : {"cpu", "cuda:", "cuda:-1", "cuda:x", "mps"}) {
    absl::StatusOr<std::string> id = NvidiaSmiGpuId(d, nullptr);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << d;
  }
  EXPECT_NE(NvidiaSmiGpuId("cpu", nullptr).status().message().find("device 'cpu' is not a CUDA"),
            std::string::npos);
}

// The production lister against a stand-in nvidia-smi (a shell script):
// the arguments it passes, the parse, a failing and a hanging one.
std::string Script(const std::string& name, const std::string& body) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(NvidiaSmiTest, ListerRunsNvidiaSmiForItsGpu) {
  const std::string fake = Script(
      "fake-nvidia-smi",
      "[ \"$1 $2 $3\" = \"--id=1 --query-compute-apps=pid,used_memory "
      "--format=csv,noheader,nounits\" ] || { echo \"bad args: $*\" >&2; exit 2; }\n"
      "echo '4242, 512'");
  NvidiaSmiLister lister("1", absl::Seconds(20), fake);
  absl::StatusOr<std::vector<GpuProcess>> p = lister.List();
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ((*p)[0].pid, 4242);
  EXPECT_EQ((*p)[0].used_bytes, 512 * kMiB);
  EXPECT_EQ(lister.Describe(), "GPU 1 (" + fake + ")");
  EXPECT_EQ(NvidiaSmiLister("0", absl::Seconds(20), fake).List().status().code(),
            absl::StatusCode::kUnavailable);  // "bad args"
}

TEST(NvidiaSmiTest, ListerReportsABrokenOrHungNvidiaSmi) {
  NvidiaSmiLister broken(
      "0", absl::Seconds(20),
      Script("broken-nvidia-smi",
             "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
             "driver\" >&2; exit 9"));
  absl::StatusOr<std::vector<GpuProcess>> p = broken.List();
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("exited with status 9: NVIDIA-SMI has failed"),
            std::string::npos)
      << p.status();
  NvidiaSmiLister hung("0", absl::Milliseconds(100),
                       Script("hung-nvidia-smi", "exec tail -f /dev/null"));
  EXPECT_EQ(hung.List().status().code(), absl::StatusCode::kDeadlineExceeded);
  NvidiaSmiLister missing("0", absl::Seconds(20), "skipswarm-no-nvidia-smi-here");
  EXPECT_EQ(missing.List().status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace skipswarm::node
