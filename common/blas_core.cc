#include "common/blas_core.h"

#include <dlfcn.h>

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

// Note [BLAS core]
// ~~~~~~~~~~~~~~~~
// Training on CPU spends most of its time in OpenBLAS's SGEMM, so the kernels
// OpenBLAS picks set the CPU cost per token of every node and of train-ref.
// A DYNAMIC_ARCH OpenBLAS picks them once, in its constructor, from the CPU's
// family and model; a model newer than the library falls back to a generic
// core (Prescott: SSE3), whatever instructions the CPU has. On a KVM host
// reporting Intel family 6 model 207 (AVX-512, AMX), Debian 12's 0.3.21 runs
// Prescott kernels: a single-thread SGEMM at ~23 GFLOP/s against ~95-135 with
// OPENBLAS_CORETYPE=SkylakeX.
//
// The rule upgrades only a generic fallback (a core OpenBLAS recognised is its
// authors' choice and stays) and only to a core whose every instruction set
// the CPU and OS support (__builtin_cpu_supports), so it never makes a CPU
// run instructions it lacks. Of the names 0.3.21 accepts in
// OPENBLAS_CORETYPE, SkylakeX is the fastest for SGEMM on AVX-512 CPUs
// ("Cooperlake" and "SapphireRapids" are not forceable names there: they fall
// through to detection), Haswell the fastest with AVX2 + FMA.
//
// The user's word wins: OPENBLAS_CORETYPE set (to anything) is left alone,
// and SKIPSWARM_BLAS_CORE=off keeps the library's choice.
//
// The variable only counts before the library loads, so `main` sets it and
// re-executes /proc/self/exe with the same argv (common/blas_setup.h) rather
// than telling each spawner to set it for its children: one place covers every
// subcommand that runs the model (Command::uses_blas; help, version, plan and
// the like start without the probe or the second image) and every child the
// launcher starts (they inherit the environment and so never re-execute). Re-execution cannot loop: it sets
// OPENBLAS_CORETYPE and SKIPSWARM_BLAS_CORE_FROM together, and either being
// present stops the rule, whatever core the library then reports (a
// library that ignored the variable is reported, not retried).

namespace skipswarm::common {
namespace {

// The names 0.3.21's x86_64 DYNAMIC_ARCH falls back to for an unknown CPU
// (Prescott), plus the 32-bit generic ones and an empty or unknown name.
constexpr std::array<const char*, 7> kGenericCores = {
    "prescott", "katmai", "coppermine", "northwood", "banias", "unknown", ""};

bool HasAvx512(const CpuFeatures& c) {
  return c.avx512f && c.avx512cd && c.avx512bw && c.avx512dq && c.avx512vl;
}

std::string Describe(const CpuFeatures& c) {
  if (HasAvx512(c)) return "AVX-512 F/CD/BW/DQ/VL";
  if (c.avx2 && c.fma) return "AVX2 + FMA";
  return "neither AVX-512 F/CD/BW/DQ/VL nor AVX2 + FMA";
}

}  // namespace

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512cd = __builtin_cpu_supports("avx512cd");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
#endif
  return f;
}

std::optional<OpenBlasInfo> ProbeOpenBlas() {
  // Looked up rather than linked: the BLAS behind libtorch is whatever
  // libblas.so.3 the system's alternatives name, OpenBLAS or not.
  using NameFn = char* (*)();
  auto corename = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (corename == nullptr) return std::nullopt;
  OpenBlasInfo info;
  const char* core = corename();
  info.core = core == nullptr ? "" : core;
  auto config = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const char* text = config == nullptr ? nullptr : config();
  info.dynamic_arch = text != nullptr && absl::StrContains(text, "DYNAMIC_ARCH");
  return info;
}

bool IsGenericOpenBlasCore(const std::string& core) {
  const std::string lower = absl::AsciiStrToLower(core);
  for (const char* g : kGenericCores) {
    if (lower == g) return true;
  }
  return false;
}

std::string BestOpenBlasCoreFor(const CpuFeatures& cpu) {
  if (HasAvx512(cpu)) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  return "";
}

BlasCoreDecision ChooseBlasCore(const BlasCoreInput& in) {
  BlasCoreDecision d;
  if (!in.openblas.has_value()) {
    d.log_line = "BLAS: not OpenBLAS; its kernels are left as they are";
    return d;
  }
  const std::string& core = in.openblas->core;
  if (in.reexec_from.has_value()) {
    const std::string set = in.user_coretype.value_or("");
    if (!set.empty() && absl::EqualsIgnoreCase(set, core)) {
      d.log_line = absl::StrCat("BLAS: OpenBLAS core ", core,
                                ", set by skipswarm: OpenBLAS fell back to its generic ",
                                *in.reexec_from, " kernels on this CPU (", Describe(in.cpu),
                                "); SKIPSWARM_BLAS_CORE=off keeps them");
    } else {
      d.warning = true;
      d.log_line = absl::StrCat("BLAS: OpenBLAS core ", core, " although skipswarm set ",
                                kOpenBlasCoreTypeEnv, "=", set, " in place of ", *in.reexec_from,
                                "; not retried");
    }
    return d;
  }
  if (in.user_coretype.has_value()) {
    d.log_line = absl::StrCat("BLAS: OpenBLAS core ", core, " (", kOpenBlasCoreTypeEnv, "=",
                              *in.user_coretype, ", the user's choice)");
    return d;
  }
  if (!in.mode.empty() && in.mode != "auto") {
    d.warning = in.mode != "off";
    d.log_line = absl::StrCat("BLAS: OpenBLAS core ", core, " (", kBlasCoreModeEnv, "=", in.mode,
                              d.warning ? ", not auto or off: treated as off)" : ")");
    return d;
  }
  if (!IsGenericOpenBlasCore(core)) {
    d.log_line = absl::StrCat("BLAS: OpenBLAS core ", core, " (OpenBLAS's choice for this CPU)");
    return d;
  }
  if (!in.openblas->dynamic_arch) {
    d.log_line = absl::StrCat("BLAS: OpenBLAS core ", core,
                              " (built for that core alone, no DYNAMIC_ARCH: nothing to choose)");
    return d;
  }
  const std::string best = BestOpenBlasCoreFor(in.cpu);
  if (best.empty()) {
    d.log_line = absl::StrCat("BLAS: OpenBLAS core ", core, " (generic; this CPU has ",
                              Describe(in.cpu), ")");
    return d;
  }
  d.force = best;
  d.from = core;
  d.log_line = absl::StrCat("BLAS: OpenBLAS fell back to its generic ", core,
                            " kernels on this CPU (", Describe(in.cpu), "); forcing ", best);
  return d;
}

}  // namespace skipswarm::common
