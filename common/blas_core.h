// Which OpenBLAS kernels a training process should run (Note [BLAS core]).
//
// OpenBLAS built with DYNAMIC_ARCH picks its kernels once, in its library
// constructor, from the CPU's model number. A CPU newer than the library
// (Debian 12's 0.3.21 on an Intel family 6 model 207, say) gets the generic
// Prescott (SSE3) kernels even when it has AVX-512: GEMM then runs ~4x slower.
// The only way to choose is the OPENBLAS_CORETYPE environment variable, read
// by that constructor, so it must be set before the process starts: `main`
// sets it and re-executes itself once (cli/blas_setup.h).
//
// This module is the rule, as a pure function of what it is told, plus the
// two probes that tell it what the process has (no environment reads here):
//
//   BlasCoreInput in;
//   in.openblas = ProbeOpenBlas();        // absent when the BLAS is not OpenBLAS
//   in.cpu = DetectCpuFeatures();
//   in.user_coretype = ...;               // OPENBLAS_CORETYPE, if set
//   BlasCoreDecision d = ChooseBlasCore(in);
//   if (!d.force.empty()) { /* set the variables, re-exec */ }
//
// Thread rule: all functions are thread-compatible and stateless.
#ifndef SKIPSWARM_COMMON_BLAS_CORE_H_
#define SKIPSWARM_COMMON_BLAS_CORE_H_

#include <optional>
#include <string>

namespace skipswarm::common {

// The environment variable OpenBLAS reads to force a core.
inline constexpr char kOpenBlasCoreTypeEnv[] = "OPENBLAS_CORETYPE";
// auto (default) or off: whether skipswarm may choose a core.
inline constexpr char kBlasCoreModeEnv[] = "SKIPSWARM_BLAS_CORE";
// Set with OPENBLAS_CORETYPE when skipswarm re-executed itself: the generic
// core it replaced. Its presence means "already re-executed": never again.
inline constexpr char kBlasCoreFromEnv[] = "SKIPSWARM_BLAS_CORE_FROM";

// Instruction sets the kernels need, as the CPU and the OS both support them
// (__builtin_cpu_supports checks the OS's saved-state support too).
struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512cd = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
};

// This CPU's features.
CpuFeatures DetectCpuFeatures();

// What the process's OpenBLAS says about itself.
struct OpenBlasInfo {
  std::string core;           // openblas_get_corename(), e.g. "Prescott"
  bool dynamic_arch = false;  // openblas_get_config() lists DYNAMIC_ARCH
};

// The loaded OpenBLAS's core, looked up by symbol; nullopt when the process's
// BLAS is not OpenBLAS (no openblas_get_corename).
std::optional<OpenBlasInfo> ProbeOpenBlas();

struct BlasCoreInput {
  std::optional<OpenBlasInfo> openblas;
  CpuFeatures cpu;
  // Value of OPENBLAS_CORETYPE when set (even empty): the user's choice,
  // unless `reexec_from` says skipswarm set it.
  std::optional<std::string> user_coretype;
  // Value of SKIPSWARM_BLAS_CORE: "", "auto" or "off" (anything else is off).
  std::string mode;
  // Value of SKIPSWARM_BLAS_CORE_FROM when set.
  std::optional<std::string> reexec_from;
};

struct BlasCoreDecision {
  // Non-empty: the core to force (set OPENBLAS_CORETYPE to it and
  // SKIPSWARM_BLAS_CORE_FROM to `from`, then re-execute). Empty: keep what
  // the library chose.
  std::string force;
  std::string from;
  // One line for the log: the core in use or to be forced, and why.
  std::string log_line;
  // The line reports something the user should look at (an unknown mode, a
  // forced core the library ignored).
  bool warning = false;
};

// Whether `core` (as openblas_get_corename spells it, any case) is one of the
// generic x86 cores OpenBLAS falls back to for a CPU it does not recognise.
bool IsGenericOpenBlasCore(const std::string& core);

// The fastest core of OpenBLAS 0.3.21's forceable names whose kernels `cpu`
// can run: "SkylakeX" (AVX-512 F/CD/BW/DQ/VL), "Haswell" (AVX2 + FMA), or
// "" when neither.
std::string BestOpenBlasCoreFor(const CpuFeatures& cpu);

// The rule (Note [BLAS core]). Forces a core only when the library is a
// DYNAMIC_ARCH OpenBLAS that fell back to a generic core, the user set
// neither OPENBLAS_CORETYPE nor mode "off", this process was not already
// re-executed for it, and the CPU has every instruction set of the core.
BlasCoreDecision ChooseBlasCore(const BlasCoreInput& in);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_BLAS_CORE_H_
