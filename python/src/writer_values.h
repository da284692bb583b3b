// The values `_core.Writer` is given, checked to be stored as they are: no silent casts.
// Each function runs with the GIL held and raises ValueError as
// "<where>: value 300 at [0, 2] does not fit u8 (uint8)" for a value it cannot keep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "python/src/binding.h"

namespace shardify::python {

// `obj`'s str() as UTF-8, for a message: a character UTF-8 cannot hold is written as its
// escape (\ud800), and a str() that fails as "?".
std::string Printable(const py::handle& obj);

// The name of `obj`'s type ("float", "Tensor").
std::string TypeName(const py::handle& obj);

// An int field's value: a Python int or anything with __index__ (numpy and torch integers),
// within int64.
int64_t IntValue(const py::handle& obj, const std::string& where);

// A float field's value: a float, or anything with __float__. An integer must be held by
// float64 exactly; `finite` refuses NaN and infinity.
double FloatValue(const py::handle& obj, bool finite, const std::string& where);

// A str as UTF-8, `what` saying what it is for ("a string field"): another type is refused,
// and so is a str that is not well-formed text (a lone surrogate such as "\ud800", or a
// name os.listdir decoded from bytes that are not UTF-8).
std::string TextValue(const py::handle& obj, const char* what, const std::string& where);

// A bytes field's value: bytes, a bytearray or a memoryview, copied.
std::vector<uint8_t> BytesValue(const py::handle& obj, const std::string& where);

// A (nested) list or tuple of numbers as an array of `dtype` (numpy's `numpy_dtype`). Each
// value must be held by `dtype`: an integer dtype takes whole numbers within its range, a
// float dtype integers it holds exactly and floats within its finite range (rounded to
// the nearest, NaN and infinity as they are).
py::array ListValue(const py::handle& obj, DType dtype, const py::object& numpy_dtype, const std::string& where);

// Whether the `bytes` bytes at `p`, elements of `t`, are all finite (integers are).
bool AllFinite(DType t, const uint8_t* p, size_t bytes);

}  // namespace shardify::python
