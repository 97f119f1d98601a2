"""Build macros shared by every SkipSwarm package.

The wrappers add the project's warning flags to our own code only; system
headers (/usr/include, libtorch) are included as system headers, so their
warnings stay out of our builds.
"""

WARNINGS = [
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Werror=return-type",
]

# The flags of an opt compile of our code (the toolchain's, .bazelrc's and
# WARNINGS), which GCC's precompiled-header check compares: a .gch built
# with other flags is silently ignored. Keep in step with .bazelrc; to
# check, build with --copt=-Winvalid-pch and look for "not used because".
PCH_FLAGS = [
    "-U_FORTIFY_SOURCE",
    "-fstack-protector",
    "-Wall",
    "-Wunused-but-set-parameter",
    "-Wno-free-nonheap-object",
    "-fno-omit-frame-pointer",
    "-g0",
    "-O2",
    "-D_FORTIFY_SOURCE=1",
    "-DNDEBUG",
    "-ffunction-sections",
    "-fdata-sections",
    "-fPIC",
    "-D_GLIBCXX_USE_CXX11_ABI=1",
    "-std=c++17",
    "-fno-canonical-system-headers",
    "-Wno-builtin-macro-redefined",
    "-D__DATE__=\\\"redacted\\\"",
    "-D__TIMESTAMP__=\\\"redacted\\\"",
    "-D__TIME__=\\\"redacted\\\"",
] + WARNINGS

# A test's sources compile at -O1 (_TEST_OPT below); its precompiled header
# is built the same way.
TEST_PCH_FLAGS = ["-O1"]

def _pch_copts(torch, test = False, pch = True):
    """The precompiled header a TU starts from in opt builds.

    `torch = True`: libtorch's (third_party/torch_pch.in.h); otherwise the
    common system headers' (third_party/common_pch.in.h), with GoogleTest
    for tests. `pch = False`: none (sources whose system headers clash with
    those, e.g. SentencePiece's own absl::string_view).
    """
    if not pch:
        return []
    if torch:
        header = "third_party/torch_pch.h"
    elif test:
        header = "third_party/test_pch.h"
    else:
        header = "third_party/common_pch.h"
    return select({
        "//bazel:opt_no_pch": [],
        "//bazel:opt": ["-include", header],
        "//conditions:default": [],
    })

def _pch_deps(torch, test = False, pch = True):
    if not pch:
        return []
    if torch:
        label = "//third_party:torch_pch"
    elif test:
        label = "//third_party:test_pch"
    else:
        label = "//third_party:common_pch"
    return select({
        "//bazel:opt_no_pch": [],
        "//bazel:opt": [label],
        "//conditions:default": [],
    })

# Every macro takes `torch`: set it on targets whose sources include
# libtorch headers (directly or through model/ headers). It only speeds
# the compile up; the target must still depend on what it includes.

def ss_cc_library(name, copts = [], deps = [], torch = False, pch = True, **kwargs):
    native.cc_library(
        name = name,
        copts = WARNINGS + copts + _pch_copts(torch, pch = pch),
        deps = deps + _pch_deps(torch, pch = pch),
        **kwargs
    )

def ss_cc_binary(name, copts = [], deps = [], torch = False, pch = True, **kwargs):
    native.cc_binary(
        name = name,
        copts = WARNINGS + copts + _pch_copts(torch, pch = pch),
        deps = deps + _pch_deps(torch, pch = pch),
        **kwargs
    )

# Test sources (not the libraries they test, which stay at -O2) compile at
# -O1 in opt builds: gtest's macro-heavy bodies cost 10-30% more CPU at -O2
# for no gain, and the cold `bazel test //...` on 2 cores is budgeted. GCC
# still accepts the -O2 torch precompiled header at -O1 (checked with -H).
_TEST_OPT = select({
    "//bazel:opt": ["-O1"],
    "//conditions:default": [],
})

def ss_cc_test(name, copts = [], deps = [], size = "small", torch = False, pch = True, **kwargs):
    """A gtest binary linked with gtest/gmock's main(); small unless told otherwise."""
    native.cc_test(
        name = name,
        size = size,
        copts = WARNINGS + copts + _pch_copts(torch, test = True, pch = pch) + _TEST_OPT,
        deps = deps + ["//third_party:gtest_main"] + _pch_deps(torch, test = True, pch = pch),
        **kwargs
    )

def ss_cc_benchmark(name, copts = [], deps = [], tags = [], torch = False, pch = True, **kwargs):
    """A Google Benchmark binary; tagged so `bazel test //...` builds but never runs it."""
    native.cc_binary(
        name = name,
        testonly = True,
        copts = WARNINGS + copts + _pch_copts(torch, pch = pch),
        deps = deps + ["//third_party:benchmark_main"] + _pch_deps(torch, pch = pch),
        tags = tags + ["benchmark"],
        **kwargs
    )

def ss_cc_proto_library(name, srcs, deps = [], grpc = False, visibility = None):
    """C++ protobuf (and optionally gRPC) code generated with the system protoc.

    Bazel's native proto_library needs @com_google_protobuf, which would be
    downloaded; a genrule over /usr/bin/protoc keeps the build offline.

    Args:
      name: the cc_library to create.
      srcs: .proto files in this package; they import each other as
        "proto/<file>.proto" (paths relative to the workspace root).
      deps: other ss_cc_proto_library targets whose .proto files are imported.
      grpc: also generate service stubs with grpc_cpp_plugin.
      visibility: of the cc_library.
    """
    pkg = native.package_name()
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    dep_protos = [d + "_protos" for d in deps]
    native.filegroup(name = name + "_protos", srcs = srcs + dep_protos)
    cmd = "/usr/bin/protoc -I. --cpp_out=$(GENDIR)"
    if grpc:
        cmd += " --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin --grpc_out=$(GENDIR)"
    cmd += " " + " ".join([pkg + "/" + s for s in srcs])
    native.genrule(
        name = name + "_gen",
        srcs = srcs + dep_protos,
        outs = outs,
        cmd = cmd,
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc"] if grpc else []),
        visibility = visibility,
    )
