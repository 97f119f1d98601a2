"""Macros for the tests that run the built `skipswarm` binary (tests/README.md)."""

load("//bazel:defs.bzl", "ss_cc_test")

# The binary under test: the one place that names its label.
SKIPSWARM_BINARY = "//cli:skipswarm"

def ss_binary_test(name, data = [], deps = [], env = {}, **kwargs):
    """A gtest that spawns `skipswarm` (tests/harness/skipswarm_process.h).

    The binary joins the test's runfiles and $SKIPSWARM_BINARY names it.
    Other arguments as ss_cc_test (size defaults to small).
    """
    test_env = dict(env)
    test_env["SKIPSWARM_BINARY"] = "$(rootpath %s)" % SKIPSWARM_BINARY
    ss_cc_test(
        name = name,
        data = data + [SKIPSWARM_BINARY],
        env = test_env,
        deps = deps + ["//tests/harness:skipswarm_process"],
        **kwargs
    )
