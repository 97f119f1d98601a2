#include "model/torch_guard.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <new>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "model/out_of_memory.h"

namespace skipswarm::model {
namespace {

TEST(TorchGuardTest, LibtorchErrorsBecomeTheCallersCode) {
  absl::Status s = TorchGuard(
      "load", []() -> absl::Status { TORCH_CHECK(false, "bad bytes"); }, absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("load: libtorch: bad bytes"), absl::string_view::npos) << s;
  EXPECT_FALSE(IsOutOfMemory(s));
}

// Note [Out of memory]: every form of a failed allocation is
// RESOURCE_EXHAUSTED and recognised by IsOutOfMemory, whatever the code
// the caller asked for.
TEST(TorchGuardTest, AllocationFailuresAreOutOfMemory) {
  const absl::Status cuda = TorchGuard("Forward", []() -> absl::Status {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 2.00 GiB");
  });
  const absl::Status cpu = TorchGuard(
      "Backward",
      []() -> absl::Status {
        TORCH_CHECK(false, "DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes");
      },
      absl::StatusCode::kDataLoss);
  const absl::Status bad_alloc =
      TorchGuard("Tail", []() -> absl::Status { throw std::bad_alloc(); });
  for (const absl::Status& s : {cuda, cpu, bad_alloc}) {
    EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
    EXPECT_TRUE(IsOutOfMemory(s)) << s;
  }
  EXPECT_NE(cuda.message().find("Forward: out of memory: libtorch: CUDA out of memory"),
            absl::string_view::npos)
      << cuda;
}

// A real allocation failure of libtorch's CPU allocator (a 4 PiB tensor).
// Skipped under AddressSanitizer, whose allocator aborts on such a request.
TEST(TorchGuardTest, TheCpuAllocatorFailingIsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on a 4 PiB allocation";
#else
  absl::StatusOr<at::Tensor> t = TorchGuard("Forward", []() -> absl::StatusOr<at::Tensor> {
    return at::empty({int64_t{1} << 50}, at::kFloat);
  });
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(IsOutOfMemory(t.status())) << t.status();
#endif
}

TEST(TorchGuardTest, OtherResourceExhaustedIsNotOutOfMemory) {
  EXPECT_FALSE(IsOutOfMemory(absl::ResourceExhaustedError("decode: payload over the limit")));
  EXPECT_FALSE(IsOutOfMemory(absl::InternalError("out of memory")));
  EXPECT_TRUE(IsOutOfMemory(OutOfMemoryError("Forward", "x")));
}

}  // namespace
}  // namespace skipswarm::model
