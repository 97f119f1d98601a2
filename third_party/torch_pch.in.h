// The libtorch headers nearly every torch translation unit parses, compiled
// once per build into a GCC precompiled header (third_party:torch_pch).
// Targets built with `torch = True` (bazel/defs.bzl) get it through
// `-include third_party/torch_pch.h`, which cuts each such compile by about
// half (third_party/README.md).
//
// Contract: only system headers here, never our own (a change to them would
// rebuild every torch TU). GCC uses the .gch only when the compile's flags
// match the ones it was built with (bazel/defs.bzl PCH_FLAGS, opt builds);
// otherwise it silently parses this header instead: slower, never wrong.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>
