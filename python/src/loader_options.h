// The keyword arguments of `_core.Loader`, declared once: a table in loader_options.cpp maps
// each keyword to its place in the reader's LoaderOptions (or in BindingOptions, for the
// little that only the binding needs), with its doc. `_core.loader_options()` exposes the
// table, so the Python layer takes its defaults from it and a test checks that the
// keywords of `shardify.Loader` agree with it.
//
// To add an option: add its field to LoaderOptions (reader/loader.h), one row to the table,
// and the keyword to `shardify.Loader` (python/shardify/_loader.py) and docs/python.md.
#pragma once

#include "python/src/binding.h"
#include "reader/loader.h"

namespace shardify::python {

// What the binding needs beyond LoaderOptions.
struct BindingOptions {
  int cuda_device = -1;  // >= 0: stage batches to this CUDA device
  bool augment = false;  // LoaderOptions::augment is set
};

struct PyLoaderOptions {
  LoaderOptions loader;
  BindingOptions binding;
};

// Options from keyword arguments; a keyword left out keeps the default of LoaderOptions
// (PatchOptions for the patch keywords, BindingOptions for cuda_device). Errors (Python
// exceptions): TypeError for an unknown keyword or a value of the wrong type, naming the
// keyword and the value; ValueError for an unknown order.
PyLoaderOptions ParseLoaderOptions(const py::kwargs& kwargs);

// The order called `name`: one of SampleOrderNames() or an alias ParseSampleOrder takes.
// Errors: TypeError when `name` is not a str; ValueError "order must be one of ..., got
// '<name>'" for any other name.
SampleOrder OrderNamed(py::handle name);

// The table as [(name, default, doc)], in its order.
py::list LoaderOptionTable();

// "name (default): doc" lines, one per option, for docstrings.
std::string LoaderOptionDocs();

}  // namespace shardify::python
