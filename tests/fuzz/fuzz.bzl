"""fuzz_target: one fuzz target, in two builds.

fuzz_target(name = "x_fuzz", srcs = ["x_fuzz.cc"], deps = [...]) makes
- x_fuzz_lib: the target's LLVMFuzzerTestOneInput alone; tools/fuzz.sh asks Bazel for
  the sources under it and builds them with clang's libFuzzer, ASan and UBSan;
- x_fuzz: a cc_test (gcc, in `bazel test //...`) that runs the stored corpus
  corpus/x_fuzz/ and seeded mutants of it through the same function (replay_main.cc).
"""

def fuzz_target(name, srcs, deps = []):
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        deps = deps + [":fuzz_input"],
        alwayslink = True,
    )
    native.cc_test(
        name = name,
        size = "small",
        args = ["tests/fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]),
        deps = [
            ":" + name + "_lib",
            ":replay_main",
        ],
    )
