// LibTorch includes glog, whose one-argument CHECK macro clashes with Catch2's CHECK.
// Test files include this header first: LibTorch, then glog's CHECK dropped, then Catch2.
#pragma once

#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>
