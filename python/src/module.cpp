// The `shardify._core` extension module; the package's Python layer wraps it.
#include "python/src/binding.h"

PYBIND11_MODULE(_core, m) {
  namespace py = shardify::python::py;
  m.doc() = "shardify's C++ core: datasets, the streaming Loader and the converter.";
  m.attr("__version__") = SHARDIFY_VERSION;
  shardify::python::RegisterErrors(m);
  shardify::python::RegisterDataset(m);
  shardify::python::RegisterLoader(m);
  shardify::python::RegisterConvert(m);
  shardify::python::RegisterWriter(m);
}
