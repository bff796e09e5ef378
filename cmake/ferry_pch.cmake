# Precompiled headers. Parsing the third-party headers nearly every file
# includes (the standard library, Abseil, nlohmann/json, gRPC, protobuf and
# ferry's generated messages, GoogleTest) was about half of a test file's
# compile time; precompiled, they are parsed once per target (once for all
# the test executables) instead of once per file. Build time is most of CI's
# time (docs/hardening.md, "CI time").
#
# The headers are force-included into every C++ file of a target that uses
# them, so a file that forgets an include of these still compiles here:
# FERRY_PCH=OFF builds without them (each file must then include what it
# uses).
option(FERRY_PCH "Precompile the headers most files include" ON)

# GCC otherwise ignores a precompiled file made with other settings in
# silence (and parses the headers again); with it, FERRY_WERROR=ON fails.
if(FERRY_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Winvalid-pch>)
endif()

# One list per layer; each adds to the one below what that layer links.
# The libraries of a layer compiled with the same settings share one
# precompiled file: the RPC layer's (ps, ring, pipeline, coordinator,
# worker, server, client) is ferry_rpc's, data's is ferry_model's.
set(FERRY_PCH_BASE
    <algorithm> <atomic> <cmath> <cstdint> <cstring> <filesystem> <functional>
    <map> <memory> <optional> <string> <thread> <utility> <vector>
    <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
    <absl/strings/str_format.h> <absl/synchronization/mutex.h> <absl/time/clock.h>
    <absl/time/time.h>)
set(FERRY_PCH_MODEL ${FERRY_PCH_BASE} <nlohmann/json.hpp>)
set(FERRY_PCH_RPC ${FERRY_PCH_MODEL} <grpcpp/grpcpp.h> <ferry/v1/common.pb.h>
    <ferry/v1/coordinator.grpc.pb.h> <ferry/v1/ps.grpc.pb.h> <ferry/v1/ring.grpc.pb.h>)
set(FERRY_PCH_TEST_BASE ${FERRY_PCH_BASE} <gtest/gtest.h> <gmock/gmock.h>)
set(FERRY_PCH_TEST ${FERRY_PCH_RPC} <gtest/gtest.h> <gmock/gmock.h>)

# ferry_precompile_headers(<target> BASE|MODEL|RPC|TEST_BASE|TEST): <target>'s files
# (C++ only) get that layer's headers precompiled. A target of one or two
# files gains nothing (the headers are parsed once either way): leave it out.
function(ferry_precompile_headers target layer)
  if(FERRY_PCH)
    target_precompile_headers(${target} PRIVATE ${FERRY_PCH_${layer}})
  endif()
endfunction()

# ferry_reuse_precompiled_headers(<target> <from>): <target> uses <from>'s
# precompiled headers; both must be compiled with the same definitions and
# options (the compiler otherwise ignores the precompiled file and parses the
# headers again).
function(ferry_reuse_precompiled_headers target from)
  if(FERRY_PCH)
    target_precompile_headers(${target} REUSE_FROM ${from})
  endif()
endfunction()
