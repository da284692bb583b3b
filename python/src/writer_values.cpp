#include "python/src/writer_values.h"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace shardify::python {
namespace {

// What a dtype holds: integers of `bits` bits, or floats of a `bits`-bit significand
// (with the implicit bit) and largest exponent `emax`.
struct Range {
  bool floating;
  bool is_signed;
  int bits;
  int emax;
};

Range RangeOf(DType t) {
  switch (t) {
    case DType::kU8:
      return {false, false, 8, 0};
    case DType::kI8:
      return {false, true, 8, 0};
    case DType::kU16:
      return {false, false, 16, 0};
    case DType::kI16:
      return {false, true, 16, 0};
    case DType::kU32:
      return {false, false, 32, 0};
    case DType::kI32:
      return {false, true, 32, 0};
    case DType::kI64:
      return {false, true, 64, 0};
    case DType::kF16:
      return {true, true, 11, 15};
    case DType::kF32:
      return {true, true, 24, 127};
    case DType::kF64:
      return {true, true, 53, 1023};
  }
  return {false, false, 0, 0};
}

// Of a float range narrower than float64: the magnitude from which values round to infinity.
double Overflow(const Range& r) { return std::ldexp(2.0 - std::ldexp(1.0, -r.bits), r.emax); }

// Whether the integer -magnitude (negative) or +magnitude is held exactly.
bool HoldsInteger(const Range& r, bool negative, uint64_t magnitude) {
  if (!r.floating) {
    const uint64_t half = uint64_t{1} << (r.bits - 1);  // unsigned dtypes have at most 32 bits
    if (negative) return r.is_signed && magnitude <= half;
    return magnitude <= (r.is_signed ? half - 1 : 2 * half - 1);
  }
  if (magnitude == 0) return true;
  if (r.bits < 53 && static_cast<double>(magnitude) >= Overflow(r)) return false;
  uint64_t odd = magnitude;
  while ((odd & 1) == 0) odd >>= 1;
  return odd < (uint64_t{1} << r.bits);  // no more significant bits than the significand
}

// Whether the float `v` is held: whole and in range for an integer dtype; for a float one,
// NaN and infinity as they are, a finite value if it does not round to infinity.
bool HoldsFloat(const Range& r, double v) {
  if (r.floating) return !std::isfinite(v) || r.bits >= 53 || std::fabs(v) < Overflow(r);
  if (!std::isfinite(v) || std::trunc(v) != v) return false;
  const double below = r.is_signed ? -std::ldexp(1.0, r.bits - 1) : 0.0;
  return v >= below && v < std::ldexp(1.0, r.is_signed ? r.bits - 1 : r.bits);
}

std::string Where(const Shape& shape, size_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const auto n = static_cast<size_t>(shape[d]);
    index[d] = static_cast<int64_t>(flat % n);
    flat /= n;
  }
  return ShapeToString(index);
}

[[noreturn]] void Refuse(const std::string& where, const std::string& value, const Shape& shape, size_t flat, DType t,
                         const py::object& numpy_dtype) {
  const std::string at = shape.empty() ? "" : " at " + Where(shape, flat);
  Throw(InvalidArgument(where + ": value " + value + at + " does not fit " + DTypeName(t) + " (" +
                        std::string(py::str(numpy_dtype)) + ")"));
}

// Checks each element of `a` (contiguous, of C type T) with `holds`.
template <typename T, typename Holds>
void CheckEach(const py::array& a, DType t, const py::object& numpy_dtype, const std::string& where, Holds holds) {
  const Shape shape(a.shape(), a.shape() + a.ndim());
  const T* p = static_cast<const T*>(a.data());
  for (size_t k = 0; k < static_cast<size_t>(a.size()); ++k) {
    if (holds(p[k])) continue;
    if constexpr (std::is_floating_point_v<T>) {
      Refuse(where, std::string(py::repr(py::float_(p[k]))), shape, k, t, numpy_dtype);
    } else {
      Refuse(where, std::to_string(p[k]), shape, k, t, numpy_dtype);
    }
  }
}

// The message of the Python exception being raised, which is cleared.
std::string TakeError() {
  py::error_already_set e;
  return Printable(e.value());
}

}  // namespace

std::string Printable(const py::handle& obj) {
  const auto text = py::reinterpret_steal<py::object>(PyObject_Str(obj.ptr()));
  const auto utf8 = py::reinterpret_steal<py::object>(
      text ? PyUnicode_AsEncodedString(text.ptr(), "utf-8", "backslashreplace") : nullptr);
  if (!utf8) {
    PyErr_Clear();
    return "?";
  }
  return std::string(PyBytes_AS_STRING(utf8.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(utf8.ptr())));
}

std::string TypeName(const py::handle& obj) { return py::str(py::type::of(obj).attr("__name__")); }

int64_t IntValue(const py::handle& obj, const std::string& where) {
  const auto index = py::reinterpret_steal<py::object>(PyIndex_Check(obj.ptr()) ? PyNumber_Index(obj.ptr()) : nullptr);
  if (!index) {  // no __index__, or one that refuses (a float tensor)
    PyErr_Clear();
    Throw(InvalidArgument(where + ": an int field, got " + TypeName(obj)));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0)
    Throw(InvalidArgument(where + ": value " + std::string(py::str(index)) + " does not fit int (i64)"));
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

double FloatValue(const py::handle& obj, bool finite, const std::string& where) {
  if (!PyFloat_Check(obj.ptr()) && PyIndex_Check(obj.ptr())) {  // an integer: held exactly, or refused
    const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
    if (index) {
      const double v = PyLong_AsDouble(index.ptr());
      const auto back = py::reinterpret_steal<py::object>(PyErr_Occurred() ? nullptr : PyLong_FromDouble(v));
      PyErr_Clear();
      if (!back || PyObject_RichCompareBool(back.ptr(), index.ptr(), Py_EQ) != 1)
        Throw(InvalidArgument(where + ": value " + std::string(py::str(index)) + " does not fit float (f64)"));
      return v;
    }
    PyErr_Clear();  // __index__ refuses (a float tensor): its __float__ answers
  }
  if (!PyFloat_Check(obj.ptr()) && !py::hasattr(obj, "__float__"))
    Throw(InvalidArgument(where + ": a float field, got " + TypeName(obj)));
  const auto number = py::reinterpret_steal<py::object>(PyNumber_Float(obj.ptr()));
  if (!number)  // __float__ refuses (an array of more than one value)
    Throw(InvalidArgument(where + ": a float field, got " + TypeName(obj) + " (" + TakeError() + ")"));
  const double v = PyFloat_AsDouble(number.ptr());
  if (finite && !std::isfinite(v)) Throw(InvalidArgument(where + ": " + std::to_string(v) + " is not finite"));
  return v;
}

std::string TextValue(const py::handle& obj, const char* what, const std::string& where) {
  if (!PyUnicode_Check(obj.ptr())) Throw(InvalidArgument(where + ": " + what + ", got " + TypeName(obj)));
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
  if (utf8 == nullptr) Throw(InvalidArgument(where + ": not UTF-8 text (" + TakeError() + ")"));
  return std::string(utf8, static_cast<size_t>(size));
}

std::vector<uint8_t> BytesValue(const py::handle& obj, const std::string& where) {
  if (!PyBytes_Check(obj.ptr()) && !PyByteArray_Check(obj.ptr()) && !PyMemoryView_Check(obj.ptr()))
    Throw(InvalidArgument(where + ": a bytes field, got " + TypeName(obj)));
  const auto copy = py::reinterpret_steal<py::object>(PyBytes_FromObject(obj.ptr()));
  if (!copy) Throw(InvalidArgument(where + ": " + TakeError()));  // a released memoryview
  const auto* p = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(copy.ptr()));
  return std::vector<uint8_t>(p, p + PyBytes_GET_SIZE(copy.ptr()));
}

py::array ListValue(const py::handle& obj, DType dtype, const py::object& numpy_dtype, const std::string& where) {
  const py::module_ np = py::module_::import("numpy");
  py::array a;
  try {
    a = np.attr("asarray")(obj);  // numpy's reading of the values: bool, int64, uint64, float64, ...
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ValueError) && !e.matches(PyExc_TypeError)) throw;
    Throw(InvalidArgument(where + ": not a rectangular list of numbers (" + std::string(py::str(e.value())) + ")"));
  }
  const char kind = a.dtype().kind();
  const Range r = RangeOf(dtype);
  if (kind == 'b' || kind == 'i') {
    a = np.attr("ascontiguousarray")(a, "int64");
    CheckEach<int64_t>(a, dtype, numpy_dtype, where, [&](int64_t v) {
      return HoldsInteger(r, v < 0, v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
    });
  } else if (kind == 'u') {
    a = np.attr("ascontiguousarray")(a, "uint64");
    CheckEach<uint64_t>(a, dtype, numpy_dtype, where, [&](uint64_t v) { return HoldsInteger(r, false, v); });
  } else if (kind == 'f') {
    a = np.attr("ascontiguousarray")(a, "float64");
    CheckEach<double>(a, dtype, numpy_dtype, where, [&](double v) { return HoldsFloat(r, v); });
  } else {
    Throw(InvalidArgument(where + ": a list of numbers, got values numpy reads as " + std::string(py::str(a.dtype()))));
  }
  return a.attr("astype")(numpy_dtype);
}

bool AllFinite(DType t, const uint8_t* p, size_t bytes) {
  if (t == DType::kF32) {
    for (size_t k = 0; k < bytes; k += 4) {
      float v;
      std::memcpy(&v, p + k, 4);
      if (!std::isfinite(v)) return false;
    }
  } else if (t == DType::kF64) {
    for (size_t k = 0; k < bytes; k += 8) {
      double v;
      std::memcpy(&v, p + k, 8);
      if (!std::isfinite(v)) return false;
    }
  } else if (t == DType::kF16) {
    for (size_t k = 0; k < bytes; k += 2) {
      uint16_t h;
      std::memcpy(&h, p + k, 2);
      if ((h & 0x7c00) == 0x7c00) return false;
    }
  }
  return true;
}

}  // namespace shardify::python
