// The dejaview._dejaview extension module (docs/python.md): pybind11 from Debian's
// python3-pybind11 over the C++ libraries; the pure-Python modules in python/dejaview/ build on it.
#include "binding.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <mutex>

namespace dv::py {

void KeepDecodingMemory() {
#if defined(__GLIBC__)
  // A decode allocates and frees tens of megabytes of working memory a frame. By default glibc
  // gives large free blocks back to the kernel (blocks over M_MMAP_THRESHOLD are unmapped, the
  // heap's top is trimmed past M_TRIM_THRESHOLD), and whether it does between two frames depends
  // on what else the process holds: in a Python loop it did, and every page of the next frame's
  // working memory was faulted in again (the C++ CLI's own loop keeps them). Thresholds above a
  // frame's working set keep that memory in the heap for the next frame.
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the ceiling glibc's own dynamic threshold stops at
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
  });
#endif
}

namespace {

struct ErrorClasses {
  PyObject* base = nullptr;
  PyObject* format = nullptr;
  PyObject* store = nullptr;
  PyObject* not_found = nullptr;
  PyObject* argument = nullptr;
};
ErrorClasses errors;  // owned by the module (added to it), alive while it is loaded

PyObject* NewError(pyb::module_& m, const char* name, pyb::tuple bases, const char* doc) {
  const std::string qualified = std::string("dejaview.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!cls) throw pyb::error_already_set();
  m.add_object(name, pyb::handle(cls));
  return cls;
}

PyObject* ClassFor(Status::Code code) {
  switch (code) {
    case Status::Code::kCorruption:
    case Status::Code::kOutOfRange:
      return errors.format;
    case Status::Code::kIoError:
    case Status::Code::kUnavailable:
      return errors.store;
    case Status::Code::kNotFound:
      return errors.not_found;
    case Status::Code::kInvalidArgument:
      return errors.argument;
    case Status::Code::kOk:
      break;
  }
  return errors.base;
}

}  // namespace

std::string PathArg(const pyb::handle& path) {
  PyObject* fs = PyOS_FSPath(path.ptr());
  if (!fs) throw pyb::error_already_set();
  const pyb::object text = pyb::reinterpret_steal<pyb::object>(fs);
  if (!pyb::isinstance<pyb::str>(text)) {
    throw StatusError(Status::InvalidArgument("path: expected str or os.PathLike to str"));
  }
  return text.cast<std::string>();
}

std::string OptionalPathArg(const pyb::object& path) {
  return path.is_none() ? std::string() : PathArg(path);
}

void RegisterErrors(pyb::module_& m) {
  errors.base = NewError(m, "Error", pyb::make_tuple(pyb::handle(PyExc_Exception)),
                         "Every error dejaview raises; the message is the C++ library's.");
  const pyb::handle base(errors.base);
  errors.format = NewError(m, "FormatError", pyb::make_tuple(base),
                           "Malformed input: a file, object or field that is not what its format "
                           "says (the message names it and the offset or field).");
  errors.store = NewError(m, "StoreError", pyb::make_tuple(base),
                          "A store, tier or file that could not be read or written.");
  errors.not_found =
      NewError(m, "NotFoundError",
               pyb::make_tuple(pyb::handle(errors.store), pyb::handle(PyExc_LookupError)),
               "A file, object, map version or store that does not exist.");
  errors.argument =
      NewError(m, "ArgumentError", pyb::make_tuple(base, pyb::handle(PyExc_ValueError)),
               "An argument out of its range.");
  pyb::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyErr_SetString(ClassFor(e.status().code()), e.status().ToString().c_str());
    }
  });
}

}  // namespace dv::py

PYBIND11_MODULE(_dejaview, m) {
  m.doc() = "dejaview's C++ core: stores, frame queries, the decoder, export batches";
  dv::py::RegisterErrors(m);
  dv::py::RegisterFrames(m);
  dv::py::RegisterStore(m);
  dv::py::RegisterBatch(m);
}
