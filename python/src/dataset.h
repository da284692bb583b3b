// The `_core.Dataset` handle, shared with loader.cpp (a Loader reads an opened Dataset).
#pragma once

#include <memory>

#include "format/dataset.h"
#include "python/src/binding.h"

namespace shardify::python {

struct PyDataset {
  std::shared_ptr<const Dataset> dataset;
};

}  // namespace shardify::python
